"""clashx's whole pipeline on a strike recording: tracks → labels → two-stage identification → fine-tuning.

A recording (`clashx.events._ingest_strike` format) holds every strike's motion-capture
track.  `fit_recording` runs, in this order:

1. **Labels.** Each touched strike's post-impact velocity from its track
   (`clashx.events._ingest_strike`, the stop-time slide fit with a file-level prior).
2. **Stage 2 of HALO first: the ground, from the slides.** A block sliding
   on a floor with Coulomb friction decelerates at μ2·g whatever its mass,
   so the slides' deceleration pooled over the file (the labels' file-level
   prior, robust to outliers) gives μ2 = a / g with its spread.  (Fitting the
   ground through MuJoCo's own slide, `clashx.hybrid._strike_slide.fit_slides`, was tried:
   on lab A its μ2 moved from 0.30 to 0.40 with the centre of mass it was
   given, because MuJoCo's slide and spin-down are not the lab's; the
   deceleration gave 0.28-0.30 on every file.)
3. **Stage 1: the impact, through the surrogate.** Every parameter is
   identified from the labels through the frozen surrogate
   (`clashx.identify`), μ2 held at stage 2's value by a tight prior, the
   block's mass and centre of mass, the time constant and the torsion under
   a Gaussian prior around the drawing's values (`prior_std`, σ = one prior
   range).  That σ was chosen among 0.3, 0.6, 1, 2 and flat on twelve fits
   (three shapes; lab A's seeds 2 and 12 and two labs of our own with other
   parameters), by the mean α = 0.1 accuracy of the identified surrogate:
   0.556, 0.585, 0.615, 0.564, 0.516.  Tighter priors hold the semi-cylinder's
   centre of mass at the drawing's where its lab-A fits want it 3-8 mm off
   along -y (MuJoCo's way of absorbing what its contact model lacks there);
   flat ones let ten labels overfit the square and the triangle.
4. **Joint refinement.** Multistart again from stage 1, with μ2's prior
   widened to stage 2's uncertainty (at least `min_slide_std` of its range);
   the uncertainty per parameter is the Laplace estimate.
5. **Local re-distillation** (`clashx.learn._distil`): the surrogate refined on a
   few thousand fresh MuJoCo C strikes around the identified parameters, so
   that its own error where it is used shrinks (simulation only).
6. **Fine-tuning** (`clashx.finetune`): early-stopped by cross-validation
   that holds out whole strikes.

Nothing here reads the lab's parameter file or `post_velocity_true`.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..core import Float, PRNGKeyArray, short_repr
from ..events import events_label_sigma, ingest_strike_lab, meta_dict, recording_arrays, speed_vector
from ..hybrid import ingest_by_simulation
from ..scenes import StrikeScene
from ..scenes import geometry as geo
from ..surrogate import StrikeSurrogate
from ._distil import LocalDistilConfig, distil_locally
from ._finetune import FinetuneConfig, finetune
from ._identify import identify
from ._predictive import PRIOR_VAR, predictive

MIN_MISFIT = 1e-12  # `misfit_weights`' floor of the equal-weight fit's loss


@dataclasses.dataclass(frozen=True)
class LabFitConfig:
    """How `fit_recording` identifies and fine-tunes.

    Attributes:
        free: the parameters identified (default: all of the surrogate's space); the others keep
            their nominal values (μ2: the slides').
        labels: how the tracks become velocities: "stop-time" (`clashx.events._ingest_strike`, a slide
            model per strike: the better on the lab's tracks) or "sim" (MuJoCo's slide fitted to
            all tracks, `clashx.hybrid._strike_slide.ingest_by_simulation`: exact where the tracks are MuJoCo's).
        prior_std: Gaussian prior per parameter, in units of its prior range, around the nominal block.
        stage1_slide_std: μ2's prior σ in stage 1 (units of its range): held at stage 2's value.
        min_slide_std: floor of μ2's prior σ in the joint refinement (units of the range).
        n_starts: identification starts.
        iterations: Levenberg-Marquardt trials per start.
        local: re-distillation around the identified parameters (`clashx.learn._distil`; None: skip it).
        finetune: fine-tuning settings (None: skip it).
        slides_required: a recording whose slides are too few or too short to read μ2 from is
            an error (True), or μ2 starts from its nominal value with the prior's spread (False:
            the first few strikes of `clashx.workflows._next_strikes.strike_loop`).
        label_weights: weigh each stop-time label in the joint identification by 1 / (stage 1's fit loss +
            its track's σ², read at ingestion: `clashx.events.events_label_sigma`), as `fit_recording`'s
            `label_sigma` does
            (False: equal weights).  Measured on 30 ten-strike fits of three labs (README, "What the labels
            cost"); the rule has no tuned constant.
    """

    free: tuple[str, ...] | None = None
    labels: str = "stop-time"
    prior_std: tuple[tuple[str, float], ...] = (
        ("mass", 1.0),
        ("com_x", 1.0),
        ("com_y", 1.0),
        ("timeconst1", 1.0),
        ("torsion", 1.0),
    )
    robust: float = 0.0
    stage1_slide_std: float = 1e-3
    min_slide_std: float = 0.01
    n_starts: int = 12
    iterations: int = 30
    local: LocalDistilConfig | None = LocalDistilConfig()
    finetune: FinetuneConfig | None = FinetuneConfig()
    slides_required: bool = True
    label_weights: bool = True


class LabFit(NamedTuple):
    """What `fit_recording` returns.

    Attributes:
        params: (p,) identified values of the surrogate's space.
        std: (p,) their one-sigma uncertainty.
        model: the surrogate after local re-distillation and fine-tuning.
        events: the ingested event dict of the recording (labels).
        rows: the rows (strikes) used.
        report: stages' results and timings, JSON-able.
        identified_model: the surrogate before fine-tuning (after local re-distillation); `strike_predictive`
            takes its residuals on the fit strikes as the noise.
    """

    params: np.ndarray
    std: np.ndarray
    model: StrikeSurrogate
    events: dict[str, np.ndarray]
    rows: np.ndarray
    report: dict[str, Any]
    identified_model: StrikeSurrogate | None = None

    def __repr__(self) -> str:
        return short_repr(self)


def ground_friction(events: dict[str, np.ndarray]) -> tuple[float, float]:
    """μ2 and its one-sigma from the slides: the file's pooled deceleration over g (Coulomb sliding).

    Raises:
        ValueError: the recording's slides were too short to pool a deceleration.
    """
    prior = meta_dict(events)["prior"]["deceleration"]
    if prior is None:
        raise ValueError(
            "too few well-measured slides to read the ground's friction from (each needs a dozen samples "
            "after release); record harder strikes or more of them"
        )
    mean, spread = prior
    return float(mean) / geo.GRAVITY, float(spread) / geo.GRAVITY


def _named(space, values) -> dict[str, float]:
    return {n: float(v) for n, v in zip(space.names, np.asarray(values))}


def fit_recording(
    model: StrikeSurrogate,
    sim: StrikeScene | None,
    recording: str | os.PathLike | Mapping[str, Any],
    *,
    where: str = "recording",
    rows: np.ndarray | None = None,
    key: PRNGKeyArray,
    config: LabFitConfig | None = None,
    label_sigma: np.ndarray | None = None,
    labels: np.ndarray | None = None,
) -> LabFit:
    """Identify the parameters and fine-tune the surrogate on the tracks of a strike recording.

    Args:
        model: the pretrained surrogate of the recording's shape.
        sim: the strike scene of that shape (its slide model and space: the surrogate's).  Only MuJoCo-side
            steps use it (`labels="sim"`, local re-distillation); None for a surrogate distilled from another
            impulse family (its own parameter space), with `config.local` None and stop-time labels.
        recording: the recording: its file (e.g. `clashx.lab_recording("square", "fit")`) or its arrays
            (`clashx.events._ingest_strike` format).
        where: its name for messages (a file is named by its path).
        rows: strikes to use (default: every touched one).
        key: PRNG key (identification starts, fine-tuning folds).
        config: `LabFitConfig`.
        label_sigma: (N,) each strike's label's relative σ (NaN: unknown, taken as 0), or None.  The joint
            identification weighs each label by 1 / (stage 1's fit loss + σ²): the model's misfit plus the
            label's own variance (`clashx.identify`'s `weights`).  None: with `config.label_weights` and stop-time
            labels, the σ ingestion read off each track (`post_velocity_std`, `clashx.events.events_label_sigma`;
            unknown, so 0, for the rows of `labels`); else equal weights.
        labels: (N, 3) post-impact velocities (vx, vy, ωz; block frame) measured otherwise than by the tracks
            (e.g. a high-speed camera at the impact), used instead of the tracks' (rows with a NaN: the track's);
            the ground's friction is still read from the slides.  None: every label from its track.

    Returns:
        A `LabFit`.
    """
    config = config or LabFitConfig()
    recording, where = recording_arrays(recording, where)
    if sim is None and (config.labels == "sim" or config.local is not None):
        raise ValueError(
            "fit_recording without a MuJoCo scene (sim=None) cannot read labels by simulation or re-distil "
            "locally; pass LabFitConfig(labels='stop-time', local=None) or the shape's scene"
        )
    if sim is not None and (sim.space != model.space or sim.shape != model.shape):
        raise ValueError(f"the surrogate ({model.shape}, {model.space.names}) and the scene ({sim.shape}) differ")
    space = model.space
    times = {}
    t0 = time.perf_counter()
    if config.labels not in ("stop-time", "sim"):
        raise ValueError(f"labels {config.labels!r}: expected 'stop-time' or 'sim'")
    read_sigma = label_sigma is None and config.label_weights and config.labels == "stop-time"
    if config.labels == "sim" and sim is not None:
        events = ingest_by_simulation(recording, where, sim=sim)
    else:
        events = ingest_strike_lab(recording, where, label_sigma=read_sigma)
    if labels is not None:
        labels = np.asarray(labels, np.float64)
        if labels.shape != events["post_velocity"].shape:
            raise ValueError(f"{where}: labels must be (N, 3) = {events['post_velocity'].shape}, got {labels.shape}")
        given = np.isfinite(labels).all(1)
        events = events | {  # a label measured otherwise has no track σ: its weight is the model's misfit's
            "post_velocity": np.where(given[:, None], labels, events["post_velocity"]),
            "post_velocity_std": np.where(given[:, None], np.nan, events["post_velocity_std"]),
        }
    usable = np.flatnonzero(events["touched"] & np.isfinite(events["post_velocity"]).all(1))
    rows = usable if rows is None else np.intersect1d(np.asarray(rows), usable)
    if len(rows) < 2:
        raise ValueError(f"{where}: {len(rows)} usable strike(s); the pipeline needs at least 2 touched strikes")
    strikes, labels = events["strike"][rows], events["post_velocity"][rows]
    times["ingest_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    span_mu2 = space.high[space.index("mu2")] - space.low[space.index("mu2")]
    try:
        mu2, mu2_std = ground_friction(events)
        ground_from, stage1_mu2 = "pooled slide deceleration / g", config.stage1_slide_std
    except ValueError:
        if config.slides_required:
            raise
        mu2, mu2_std = float(space.vector()[space.index("mu2")]), span_mu2 / np.sqrt(12.0)
        ground_from, stage1_mu2 = "prior (too few well-measured slides)", 1.0 / np.sqrt(12.0)
    base = space.vector(mu2=float(np.clip(mu2, space.low[space.index("mu2")], space.high[space.index("mu2")])))
    times["ground_s"] = time.perf_counter() - t0

    k_stage1, k_joint, k_local, k_ft = jax.random.split(key, 4)
    prior = dict(config.prior_std)
    t0 = time.perf_counter()

    def search(key, base, prior_std, weights=None):
        return identify(
            model, strikes, labels, key=key, base=base, prior_std=prior_std, n_starts=config.n_starts,
            iterations=config.iterations, free=config.free, robust=config.robust, weights=weights,
        )  # fmt: skip

    stage1 = search(k_stage1, base, prior | {"mu2": stage1_mu2})
    weights = None
    if read_sigma:
        label_sigma = events_label_sigma(events)  # ingestion's σ per label, read off its track
    if label_sigma is not None:  # each label weighed by 1 / (the model's misfit + its own variance)
        label_sigma = np.asarray(label_sigma, np.float64)
        if label_sigma.shape != events["touched"].shape or np.any(label_sigma < 0):
            raise ValueError(
                f"{where}: label_sigma must hold a σ >= 0 (or NaN) per strike, {events['touched'].shape}; "
                f"got shape {label_sigma.shape}"
            )
        weights = misfit_weights(float(stage1.loss), label_sigma[rows])
    joint_prior = prior | {"mu2": max(mu2_std / span_mu2, config.min_slide_std)}
    joint = search(k_joint, np.asarray(stage1.params), joint_prior, weights)
    times["identify_s"] = time.perf_counter() - t0
    params = np.asarray(joint.params, np.float64)

    local, local_report = model, None
    t0 = time.perf_counter()
    if config.local is not None and sim is not None:
        distilled = distil_locally(model, sim, params, key=k_local, config=config.local)
        local, local_report = distilled.model, distilled.to_dict()
    times["local_distil_s"] = time.perf_counter() - t0

    tuned, ft_report = local, {"steps": 0, "reason": "fine-tuning skipped (config.finetune is None)"}
    t0 = time.perf_counter()
    if config.finetune is not None:
        ft = finetune(local, strikes, labels, params, key=k_ft, config=config.finetune)
        tuned, ft_report = ft.model, ft.to_dict()
    times["finetune_s"] = time.perf_counter() - t0

    report = {
        "rows": rows.tolist(),
        "ground": {"mu2": mu2, "mu2_std": mu2_std, "from": ground_from},
        "stage1": {"params": _named(space, stage1.params), "loss": float(stage1.loss)},
        "joint": {
            "params": _named(space, params),
            "std": _named(space, joint.std),
            "loss": float(joint.loss),
            "prior_std": _prior_std(space, joint_prior, config.free),
            "label_weights": None if weights is None else (weights / weights.mean()).tolist(),
        },
        "local_distil": local_report,
        "finetune": {k: v for k, v in ft_report.items() if k != "cv_curve"},
        "times": times | {"total_s": sum(times.values())},
    }
    return LabFit(params, np.asarray(joint.std, np.float64), tuned, events, rows, report, local)


def _prior_std(space, prior: dict[str, float], free: tuple[str, ...] | None) -> dict[str, float | None]:
    """The joint identification's prior σ per parameter in units of its range: None where flat, 0 where fixed."""
    return {n: (0.0 if free is not None and n not in free else prior.get(n)) for n in space.names}


def misfit_weights(misfit: float, sigma: Float[np.ndarray, "n"]) -> Float[np.ndarray, "n"]:
    """Each label's weight in a joint identification: 1 / (the model's misfit + the label's own variance σ²).

    Args:
        misfit: the model's mean loss per label fitted with equal weights (stage 1's `loss`); floored at
            `MIN_MISFIT`, so that labels fitted exactly do not give infinite weights.
        sigma: (n,) each label's relative σ (`clashx.events.events_label_sigma`); NaN (unknown) counts as 0, so
            such a label's weight is the misfit's alone (a label measured otherwise, taken as exact).

    Returns:
        (n,) weights, unscaled (`clashx.identify` scales them to mean 1).
    """
    variance = np.nan_to_num(np.asarray(sigma, np.float64), nan=0.0) ** 2
    return 1.0 / (max(float(misfit), MIN_MISFIT) + variance)


def strike_predictive(
    lab: LabFit, strikes: Float[np.ndarray, "m 3"], *, model: StrikeSurrogate | None = None, noise_scale: str = "mad"
) -> dict:
    """The fitted surrogate's post-impact speed vectors of `strikes` with a covariance each (`clashx.learn.predictive`).

    The noise is the relative residual of the model before fine-tuning (`lab.identified_model`) on the
    recording's fit strikes' labels; the parameters' posterior is the Laplace one in the unit box, with the
    joint identification's priors (`report["joint"]["prior_std"]`: σ² per unit coordinate where it had one,
    at most the box's 1/12, since the box truncates it; 1/12 where flat; none where held fixed).  The noise's
    scale is the residuals' median (`noise_scale="mad"`) by default: a few of the ten labels read off tracks
    are far off (relative residuals of 0.3-0.5 where the rest are near 0.1, on lab A's fits), and the velocity
    predicted is the true one, which does not share them.  Speed vectors are (vx, vy, r ωz), r the shape's
    characteristic length, the units of the α-accuracy.

    Args:
        lab: `fit_recording`'s result.
        strikes: the strikes to predict.
        model: the surrogate that predicts, its own residuals the noise (default `lab.model`, the fine-tuned
            one, with the noise of `lab.identified_model`).

    Returns:
        `predictive`'s dict: "pred" (m, 3), "cov" (m, 3, 3), "sigma_rel" (m,), "tau" (3,), "param_std_unit".
    """
    if model is None:  # the fine-tuned model, its noise from before fine-tuning
        model, noise = lab.model, (lab.model if lab.identified_model is None else lab.identified_model)
    else:
        noise = model
    space = model.space
    length = geo.characteristic_length(model.shape)
    prior_std = lab.report["joint"]["prior_std"]
    # a Gaussian prior truncated to the box is no wider than the box's own spread (1/12 per unit coordinate)
    prior_var = np.array(
        [PRIOR_VAR if prior_std[n] is None else min(prior_std[n] ** 2, PRIOR_VAR) for n in space.names]
    )
    fit_s = lab.events["strike"][lab.rows]
    y_fit = np.asarray(speed_vector(lab.events["post_velocity"][lab.rows], length))

    def speeds(m: StrikeSurrogate):
        return lambda s, p: speed_vector(m(s, p), length)

    return predictive(
        speeds(model), space.from_unit, np.asarray(space.to_unit(jnp.asarray(lab.params)), np.float64), fit_s,
        y_fit, strikes, noise_from=speeds(noise), prior_var=prior_var, noise_scale=noise_scale,
    )  # fmt: skip
