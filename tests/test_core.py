"""Core tests against cases whose answers are known exactly (section numbers: the paper's)."""

import math

import pytest
import torch

import book_tools as bt
import glauber_core as glauber
from chapters.tour import state_frequencies


def reference_splitmix64(state: int) -> int:
    """Vigna's splitmix64 generator step in plain Python integers."""
    z = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return z ^ (z >> 31)


def test_splitmix64_matches_reference_bits():
    states = [0, 1, 2**63 - 1, 12345678901234, 2**40 + 7]
    ours = glauber.splitmix64(torch.tensor(states)).tolist()
    assert [o & (2**64 - 1) for o in ours] == [reference_splitmix64(s) for s in states]
    assert reference_splitmix64(0) == 0xE220A8397B1DCDAF  # published first output for seed 0


def test_uniforms_are_uniform():
    keys = glauber._chain_keys(3, 50_000, "cpu")
    u = glauber._uniforms(keys, 17, 1).numpy()
    assert u.min() >= 0 and u.max() < 1
    from scipy.stats import kstest

    assert kstest(u, "uniform").pvalue > 1e-4


def test_nearby_seeds_give_disjoint_chain_streams():
    """Seeds s and s + 1 share no chain stream (they did when chain b's seed depended on seed + b only)."""
    streams = [set(glauber.chain_seeds(seed, 100)) for seed in range(-2, 4)]
    assert all(len(s) == 100 for s in streams) and len(set().union(*streams)) == 600


def spiky_weights(vocab: int, seed: int, empty_tail: int = 0) -> torch.Tensor:
    """A law with many zeros and a heavy last token, or with its last `empty_tail` tokens at zero
    (like the unused ids at the end of RoBERTa's and ModernBERT's vocabularies)."""
    g = torch.Generator().manual_seed(seed)
    weights = torch.rand(vocab, generator=g) ** 4
    weights[torch.randperm(vocab, generator=g)[: vocab // 3]] = 0.0
    weights[-1] = weights.max() * 3
    if empty_tail:
        weights[-empty_tail:] = 0.0
    return weights


@pytest.mark.parametrize(
    "vocab,empty_tail", [(3, 0), (127, 0), (128, 0), (129, 0), (30522, 0), (30522, 300), (50368, 100)]
)
def test_inverse_cdf_sampler_is_the_exact_inverse_cdf(vocab, empty_tail):
    """The two-level sampler returns the first token whose fp64 cumulative mass exceeds u * total."""
    weights = spiky_weights(vocab, vocab, empty_tail).expand(400, -1)
    u = glauber._uniforms(glauber._chain_keys(vocab, 400, "cpu"), 1, 1)
    cdf = weights.double().cumsum(-1)
    reference = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(1), right=True).squeeze(1)
    assert torch.equal(glauber._inverse_cdf(weights, u), reference)
    # the largest uniform, and one rounding to the total, still land on a token with mass
    extreme = glauber._inverse_cdf(weights[:2], torch.tensor([1 - 2**-53, 1.0], dtype=torch.float64))
    assert (weights[0, extreme] > 0).all()


@pytest.mark.parametrize("vocab", [3, 1000])
def test_inverse_cdf_sampler_draws_the_law(vocab):
    """Chi-square test of the sampler's frequencies; zero-weight tokens are never drawn."""
    from scipy.stats import chisquare

    weights = spiky_weights(vocab, 7)
    draws = 50_000  # the exact inverse CDF is checked above; this checks the law the uniforms give
    sample = glauber._inverse_cdf(
        weights.expand(draws, -1), glauber._uniforms(glauber._chain_keys(1, draws, "cpu"), 1, 1)
    )
    counts = torch.bincount(sample, minlength=vocab).double()
    assert counts[weights == 0].sum() == 0
    expected = weights.double() / weights.double().sum() * draws
    common = expected >= 5
    observed = torch.cat([counts[common], counts[~common & (weights > 0)].sum(0, keepdim=True)])
    wanted = torch.cat([expected[common], expected[~common].sum(0, keepdim=True)])
    if wanted[-1] == 0:
        observed, wanted = observed[:-1], wanted[:-1]
    assert chisquare(observed.numpy(), wanted.numpy()).pvalue > 1e-4


# ---------------------------------------------------------------------------------------------
# Glauber dynamics reaches the right stationary law on small chains we can enumerate
# ---------------------------------------------------------------------------------------------

N_SITES = 6


def ising(symmetric: bool, seed: int = 0, q: int = 2):
    g = torch.Generator().manual_seed(seed)
    coupling = 0.9 * torch.randn(N_SITES, N_SITES, generator=g, dtype=torch.float64)
    if symmetric:
        coupling = (coupling + coupling.T) / 2
    field = 0.5 * torch.randn(N_SITES, q, generator=g, dtype=torch.float64)
    return glauber.PottsConditionals(coupling, field, q=q)


def empirical_law(final: torch.Tensor, q: int) -> torch.Tensor:
    return torch.tensor(state_frequencies(final, q).empirical.to_numpy())


def tv(p, q):
    return 0.5 * (p - q).abs().sum().item()


CHAINS = 20_000  # the incompatible chain's law lives on 3^6 = 729 states
GIBBS_CHAINS = 3_000  # the Ising joint on 2^6 = 64 states: sampling noise about 0.037 in TV


@pytest.mark.parametrize("scan", ["random", "systematic"])
def test_glauber_matches_exact_gibbs_joint(scan):
    model = ising(symmetric=True)
    states, log_joint = model.joint_log_probs(temperature=0.8)
    x0 = torch.zeros(GIBBS_CHAINS, N_SITES, dtype=torch.long)
    final = glauber.glauber(model, x0, 120, temperature=0.8, scan=scan, record_every=120, progress=False).final
    law = empirical_law(final, 2)
    bound = 1.5 * bt.sampling_noise_tv(log_joint.exp(), GIBBS_CHAINS)  # the empirical TV concentrates near its mean
    assert tv(law, log_joint.exp()) < bound
    _, other = model.joint_log_probs(temperature=0.3)
    assert tv(law, other.exp()) > 2 * bound  # the check can tell temperatures apart


def test_glauber_matches_exact_stationary_of_incompatible_chain():
    model = ising(symmetric=False, q=3, seed=1)
    mu = glauber.exact_stationary(model, N_SITES, temperature=1.0)
    assert torch.allclose(glauber.glauber_kernel(model, N_SITES).T @ mu, mu, atol=1e-10)
    x0 = torch.randint(0, 3, (CHAINS, N_SITES), generator=torch.Generator().manual_seed(0))
    # after 80 steps the chain's exact law is within 5e-5 of mu in TV from any start (kernel^80)
    final = glauber.glauber(model, x0, 80, record_every=80, progress=False).final
    law = empirical_law(final, 3)
    bound = 1.5 * bt.sampling_noise_tv(mu, CHAINS)  # the empirical TV concentrates near its mean
    assert tv(law, mu) < bound
    # plausible wrong answers are rejected: the Gibbs joint of the symmetrised coupling, mu at tau = 0.7
    symmetrised = glauber.PottsConditionals((model.coupling + model.coupling.T) / 2, model.field, q=3)
    assert tv(law, symmetrised.joint_log_probs()[1].exp()) > bound
    assert tv(law, glauber.exact_stationary(model, N_SITES, temperature=0.7)) > bound


def test_exact_stationary_equals_gibbs_joint_for_symmetric_coupling():
    model = ising(symmetric=True, q=3)
    _, log_joint = model.joint_log_probs(temperature=1.3)
    assert torch.allclose(glauber.exact_stationary(model, N_SITES, 1.3), log_joint.exp(), atol=1e-10)


def test_kernel_rows_are_distributions():
    kernel = glauber.glauber_kernel(ising(symmetric=False), N_SITES, 0.7)
    assert torch.allclose(kernel.sum(1), torch.ones(len(kernel), dtype=torch.float64))


def test_asymmetric_coupling_has_no_joint():
    with pytest.raises(ValueError, match="asymmetric"):
        ising(symmetric=False).joint_log_probs()


def kernel_by_definition(cond, n, temperature):
    """P_tau straight from section 3.2: from every state, a site with probability 1/n, resampled from its
    conditional computed at that very state (|V|^n forwards per site)."""
    states, q = glauber.all_states(cond.vocab_size, n), cond.vocab_size
    kernel = torch.zeros(len(states), len(states), dtype=torch.float64)
    place = q ** torch.arange(n - 1, -1, -1)
    for site in range(n):
        probs = glauber.conditional_probs(cond, states, torch.full((len(states),), site), temperature).double()
        for a in range(q):
            target = states.clone()
            target[:, site] = a
            kernel[torch.arange(len(states)), (target * place).sum(1)] += probs[:, a] / n
    return kernel


class CountingConditionals:
    """Wraps a Conditionals and counts the rows (state, site) it is asked to score."""

    def __init__(self, cond):
        self.cond, self.rows = cond, 0
        self.vocab_size, self.allowed, self.max_sites = cond.vocab_size, cond.allowed, cond.max_sites

    def log_scores(self, tokens, positions):
        self.rows += len(tokens)
        return self.cond.log_scores(tokens, positions)


@pytest.mark.parametrize("q,n", [(2, 6), (3, 4), (5, 2)])
def test_kernel_takes_one_forward_per_rest_of_the_state(q, n):
    """The site-i conditional (site masked) ignores x_i, so the kernel needs n q^(n-1) forwards, not n q^n,
    and equals the kernel built from the definition."""
    g = torch.Generator().manual_seed(q)
    model = glauber.PottsConditionals(
        torch.randn(n, n, generator=g, dtype=torch.float64), torch.randn(n, q, generator=g, dtype=torch.float64), q=q
    )
    for temperature in (0.4, 1.0, 2.5):
        counting = CountingConditionals(model)
        kernel = glauber.glauber_kernel(counting, n, temperature)
        assert counting.rows == n * q ** (n - 1)
        assert (kernel - kernel_by_definition(model, n, temperature)).abs().max() <= 1e-12
        mu = glauber.exact_stationary(model, n, temperature)
        assert (mu @ kernel - mu).abs().max() <= 1e-12


def test_seed_passages_source_is_checked(monkeypatch):
    model = ising(symmetric=True)
    with pytest.raises(ValueError, match=r"passages must be one of \('bbc', 'germline', 'ms_marco'\)"):
        glauber.seed_passages(model, 4, 2, passages="wikipedia")
    with pytest.raises(ValueError, match="'germline' seeds a protein model"):
        glauber.seed_passages(model, 4, 2, passages="germline")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="offline, use the default passages='bbc'") as error:
        glauber.seed_passages(model, 4, 2, passages="ms_marco")
    assert str(error.value).count(". ") == 0  # one sentence


# ---------------------------------------------------------------------------------------------
# Maximal coupling: a ~ p, b ~ q, P(a != b) = TV(p, q)
# ---------------------------------------------------------------------------------------------


def random_log_probs(rows, vocab, generator, scale=2.0):
    """Random laws with about a tenth of each row at probability zero."""
    scores = scale * torch.randn(rows, vocab, generator=generator, dtype=torch.float64)
    scores[torch.rand(rows, vocab, generator=generator) < 0.1] = -math.inf
    return torch.log_softmax(scores, -1)


def test_maximal_coupling_marginals_and_disagreement_small_vocab():
    g = torch.Generator().manual_seed(0)
    logp, logq = random_log_probs(1, 8, g), random_log_probs(1, 8, g)
    draws = 100_000
    a, b = glauber.maximal_coupling(logp.expand(draws, -1), logq.expand(draws, -1), generator=g)
    p, q = logp[0].exp(), logq[0].exp()
    for sample, target in ((a, p), (b, q)):
        freq = torch.bincount(sample, minlength=8).double() / draws
        assert ((freq - target).abs() <= 5 * (target * (1 - target) / draws).sqrt() + 1e-4).all()
    distance = glauber.total_variation(logp, logq).item()
    disagree = (a != b).double().mean().item()
    assert abs(disagree - distance) < 5 * math.sqrt(distance * (1 - distance) / draws)


def test_maximal_coupling_vocab_sized_pairs():
    g = torch.Generator().manual_seed(1)
    vocab, rows = 30522, 250  # 5 sigma is 0.14 here: twice the TV (0.54) or an independent draw (~1) fail
    logp = random_log_probs(rows, vocab, g, scale=3.0)
    logq = torch.log_softmax(
        logp.nan_to_num(neginf=-50.0) + 0.7 * torch.randn(rows, vocab, generator=g, dtype=torch.float64), -1
    )
    distance = glauber.total_variation(logp, logq)
    assert 0.1 < distance.mean() < 0.9
    a, b = glauber.maximal_coupling(logp, logq, generator=g)
    disagree = (a != b).double()
    sigma = math.sqrt((distance * (1 - distance)).sum().item()) / rows
    assert abs(disagree.mean().item() - distance.mean().item()) < 5 * sigma
    # each draw comes from its own row's support (p has zeros): the log-probability is finite
    assert (logp == -math.inf).any(1).all()
    assert torch.isfinite(logp.gather(1, a[:, None])).all() and torch.isfinite(logq.gather(1, b[:, None])).all()


def test_maximal_coupling_extreme_cases():
    g = torch.Generator().manual_seed(2)
    logp = random_log_probs(500, 50, g)
    a, b = glauber.maximal_coupling(logp, logp.clone(), generator=g)
    assert torch.equal(a, b)
    first = torch.full((500, 4), -math.inf, dtype=torch.float64)
    second = first.clone()
    first[:, :2], second[:, 2:] = math.log(0.5), math.log(0.5)
    a, b = glauber.maximal_coupling(first, second, generator=g)
    assert (a < 2).all() and (b >= 2).all()


# ---------------------------------------------------------------------------------------------
# Rectangle incompatibility (section 4)
# ---------------------------------------------------------------------------------------------


def random_rectangles(q, rows, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, q, (rows, N_SITES), generator=g)
    i = torch.randint(0, N_SITES, (rows,), generator=g)
    j = (i + torch.randint(1, N_SITES, (rows,), generator=g)) % N_SITES
    a_new, b_new = torch.randint(0, q, (rows,), generator=g), torch.randint(0, q, (rows,), generator=g)
    return tokens, i, j, a_new, b_new


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_rectangle_delta_vanishes_for_symmetric_potts(temperature):
    model = ising(symmetric=True, q=4)
    delta = glauber.rectangle_delta(model, *random_rectangles(4, 400, 0), temperature=temperature)
    assert delta.abs().max() < 1e-5


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
def test_rectangle_delta_closed_form_for_asymmetric_potts(temperature):
    model = ising(symmetric=False, q=3)
    tokens, i, j, a_new, b_new = random_rectangles(3, 400, 1)
    rows = torch.arange(len(tokens))
    a_old, b_old = tokens[rows, i], tokens[rows, j]
    same = lambda u, v: (u == v).double()  # noqa: E731
    expected = (
        (model.coupling[j, i] - model.coupling[i, j])
        * (same(a_new, b_new) + same(a_old, b_old) - same(a_new, b_old) - same(a_old, b_new))
        / temperature
    )
    delta = glauber.rectangle_delta(model, tokens, i, j, a_new, b_new, temperature=temperature)
    assert torch.allclose(delta, expected, atol=1e-9)
    assert expected.abs().max() > 0.1  # the rectangles do probe the asymmetry


def test_rectangle_delta_antisymmetric_when_paths_swap():
    model = ising(symmetric=False, q=3, seed=4)
    tokens, i, j, a_new, b_new = random_rectangles(3, 200, 2)
    forward = glauber.rectangle_delta(model, tokens, i, j, a_new, b_new)
    swapped = glauber.rectangle_delta(model, tokens, j, i, b_new, a_new)
    assert torch.allclose(forward, -swapped, atol=1e-12)


class JointConditionals:
    """Conditionals read off an explicit joint over V^n, like a causal LM's: always compatible."""

    def __init__(self, log_joint, q, n):
        self.vocab_size, self.n = q, n
        self.allowed = torch.ones(q, dtype=torch.bool)
        self.log_joint = log_joint
        self.place = q ** torch.arange(n - 1, -1, -1)

    def log_scores(self, tokens, positions):
        base = (tokens * self.place).sum(1) - tokens.gather(1, positions[:, None])[:, 0] * self.place[positions]
        codes = base[:, None] + torch.arange(self.vocab_size)[None] * self.place[positions][:, None]
        return self.log_joint[codes]


def test_rectangle_delta_vanishes_for_any_explicit_joint():
    q = 3
    log_joint = torch.log_softmax(3 * torch.randn(q**N_SITES, dtype=torch.float64), 0)
    model = JointConditionals(log_joint, q, N_SITES)
    delta = glauber.rectangle_delta(model, *random_rectangles(q, 300, 3), temperature=0.7)
    assert delta.abs().max() < 1e-9
    assert torch.allclose(glauber.exact_stationary(model, N_SITES), log_joint.exp(), atol=1e-9)


# ---------------------------------------------------------------------------------------------
# Coupled chains (section 6.1)
# ---------------------------------------------------------------------------------------------


def test_coupling_times_first_meeting_and_stay_met():
    model = ising(symmetric=True)
    x0 = torch.zeros(300, N_SITES, dtype=torch.long)
    y0 = torch.ones(300, N_SITES, dtype=torch.long)
    y0[:5] = 0
    times = glauber.coupling_times(model, x0, y0, 400, progress=False)
    assert (times[:5] == 0).all() and (times[5:] > 0).all()
    # a pair cannot meet before every site has been updated at least once: at least 6 steps
    assert (times[5:] >= N_SITES).all()
    # same seed, same times, whatever else is in the batch
    assert torch.equal(glauber.coupling_times(model, x0[:40], y0[:40], 400, progress=False), times[:40])


def test_coupling_times_budget_and_temperature():
    model = ising(symmetric=True)
    x0 = torch.zeros(100, N_SITES, dtype=torch.long)
    y0 = torch.ones(100, N_SITES, dtype=torch.long)
    assert (glauber.coupling_times(model, x0, y0, 3, progress=False) == -1).all()
    cold = glauber.coupling_times(model, x0, y0, 600, temperature=0.2, progress=False).double()
    hot = glauber.coupling_times(model, x0, y0, 600, temperature=5.0, progress=False).double()
    cold[cold < 0] = 600
    assert hot.median() < cold.median()


def coupled_kernel(model, n, temperature):
    """Exact transition matrix of the coupled pair chain (same site, maximal coupling) on V^n x V^n."""
    q = model.vocab_size
    states = glauber.all_states(q, n)
    count = len(states)
    place = q ** torch.arange(n - 1, -1, -1)
    kernel = torch.zeros(count * count, count * count, dtype=torch.float64)
    for x in range(count):
        for y in range(count):
            for site in range(n):
                pair = torch.stack([states[x], states[y]])
                p, r = glauber.conditional_log_probs(model, pair, torch.tensor([site, site]), temperature).exp()
                excess_p, excess_r = (p - r).clamp_min(0), (r - p).clamp_min(0)
                distance = excess_p.sum()
                joint = torch.diag(torch.minimum(p, r))
                if distance > 0:
                    joint += torch.outer(excess_p, excess_r) / distance
                base_x = x - states[x, site] * place[site]
                base_y = y - states[y, site] * place[site]
                for a in range(q):
                    for b in range(q):
                        kernel[x * count + y, (base_x + a * place[site]) * count + base_y + b * place[site]] += (
                            joint[a, b] / n
                        )
    return kernel


def exact_coupling_cdf(model, n, x0, y0, temperature, horizon):
    """P(T <= t), t = 0..horizon, for the coupling time T of the pair chain started at (x0, y0)."""
    q, count = model.vocab_size, model.vocab_size**n
    place = q ** torch.arange(n - 1, -1, -1)
    kernel = coupled_kernel(model, n, temperature)
    law = torch.zeros(count * count, dtype=torch.float64)
    law[int((x0 * place).sum()) * count + int((y0 * place).sum())] = 1.0
    diagonal = torch.arange(count) * (count + 1)
    cdf = []
    for _ in range(horizon + 1):
        cdf.append(law[diagonal].sum().item())
        law = law @ kernel
    return torch.tensor(cdf)


def test_coupling_times_follow_the_exact_law():
    """Empirical CDF of coupling_times vs the exact CDF from the 64-state coupled kernel (KS distance)."""
    n, pairs, horizon = 3, 20_000, 150
    g = torch.Generator().manual_seed(3)
    coupling = torch.randn(n, n, generator=g, dtype=torch.float64)
    model = glauber.PottsConditionals((coupling + coupling.T) / 2, torch.randn(n, 2, generator=g, dtype=torch.float64))
    x0, y0 = torch.tensor([0, 0, 0]), torch.tensor([1, 1, 0])
    times = glauber.coupling_times(model, x0.expand(pairs, -1), y0.expand(pairs, -1), horizon, progress=False)
    empirical = torch.tensor([((times >= 0) & (times <= t)).double().mean().item() for t in range(horizon + 1)])
    exact = exact_coupling_cdf(model, n, x0, y0, 1.0, horizon)
    assert exact[-1] > 0.99
    assert (empirical - exact).abs().max() < 1.63 / pairs**0.5 * 1.5  # KS at level ~0.01, with margin
    assert (empirical - exact_coupling_cdf(model, n, x0, y0, 0.25, horizon)).abs().max() > 0.04


def test_coupled_disagreement_equals_tv_exactly_per_step():
    """One coupled update from two states differing at one site: mismatch rate = TV of conditionals."""
    model = ising(symmetric=False, q=3)
    x = torch.zeros(1, N_SITES, dtype=torch.long)
    y = x.clone()
    y[0, 3] = 2
    site = torch.tensor([1])
    logp = glauber.conditional_log_probs(model, x, site)
    logq = glauber.conditional_log_probs(model, y, site)
    draws = 100_000
    a, b = glauber.maximal_coupling(
        logp.expand(draws, -1), logq.expand(draws, -1), generator=torch.Generator().manual_seed(5)
    )
    distance = glauber.total_variation(logp, logq).item()
    assert distance > 0.05
    assert abs((a != b).double().mean().item() - distance) < 5 * math.sqrt(distance / draws)


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_tempered_rows_are_the_scaled_scores_of_their_own_temperature_exactly(device):
    """Chains at many temperatures in one batch draw from exactly the conditionals of a run at their temperature
    alone: each row of TemperedConditionals equals scaled_scores at that row's tau, bit for bit (a GPU divides by a
    Python number and by a tensor differently, so both must divide the same way)."""

    class OnDevice:
        def __init__(self, base):
            self.base, self.vocab_size = base, base.vocab_size
            self.allowed, self.device = base.allowed.to(device), torch.device(device)

        def log_scores(self, tokens, positions):
            return self.base.log_scores(tokens.cpu(), positions.cpu()).float().to(device) * 1.37

    cond = OnDevice(ising(symmetric=False, q=3))
    taus = [0.3, 0.1, 1.0, 0.3, 7.0, 0.1]
    states = torch.randint(3, (len(taus), N_SITES), generator=torch.Generator().manual_seed(1)).to(device)
    positions = torch.arange(len(taus)).remainder(N_SITES).to(device)
    tempered = glauber.TemperedConditionals(cond, taus).log_scores(states, positions)
    for row, tau in enumerate(taus):
        alone = glauber.scaled_scores(cond, states[row : row + 1], positions[row : row + 1], tau)
        assert torch.equal(tempered[row], alone[0]), (row, tau)
