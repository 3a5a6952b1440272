"""A small LAMB optimizer (layer-wise adaptive moments) for BERT pretraining.

LAMB (You et al., 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes") is Adam with
decoupled weight decay whose per-tensor step is rescaled by a *trust ratio*:

    m_t = beta1 * m_{t-1} + (1 - beta1) * g_t
    v_t = beta2 * v_{t-1} + (1 - beta2) * g_t**2
    m_hat = m_t / (1 - beta1**t),  v_hat = v_t / (1 - beta2**t)        (when bias_correction is on)
    u_t = m_hat / (sqrt(v_hat) + eps) + weight_decay * p_{t-1}
    r_t = ||p_{t-1}|| / ||u_t||   (1 when either norm is zero; min(r_t, 1) when clamp_trust_ratio)
    p_t = p_{t-1} - lr * r_t * u_t

Everything stays a tensor operation (no ``.item()`` and no Python branch on tensor values), so the same code traces
into a single graph on XLA/Neuron devices as well as running eagerly on CPU. Gradient clipping is left to the
caller (``torch.nn.utils.clip_grad_norm_``), as it is for ``torch.optim.AdamW``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer

__all__ = ["Lamb"]


def _bias_correction(beta: float, step: torch.Tensor) -> torch.Tensor:
    """``1 - beta**step`` as ``-expm1(step * log(beta))``: accurate in float32 even for beta2 = 0.999."""
    if beta == 0.0:
        return torch.ones_like(step)
    return -torch.expm1(step * math.log(beta))


class Lamb(Optimizer):
    """LAMB optimizer.

    Args:
        params: parameters or parameter groups, as for any ``torch.optim.Optimizer``.
        lr: learning rate.
        betas: coefficients of the running averages of the gradient and of its square.
        eps: added to the denominator for numerical stability.
        weight_decay: decoupled weight decay, applied inside the trust-ratio update (0 disables it).
        bias_correction: divide the moments by ``1 - beta**t`` as Adam does.
        clamp_trust_ratio: cap the trust ratio at 1, so a layer never moves faster than the Adam-style step.
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
        bias_correction: bool = True,
        clamp_trust_ratio: bool = False,
    ) -> None:
        if lr < 0.0:
            raise ValueError(f"Lamb: lr must be >= 0, got {lr}")
        if eps < 0.0:
            raise ValueError(f"Lamb: eps must be >= 0, got {eps}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas must each be in [0, 1), got {betas}")
        if weight_decay < 0.0:
            raise ValueError(f"Lamb: weight_decay must be >= 0, got {weight_decay}")
        defaults = {
            "lr": lr,
            "betas": betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "bias_correction": bias_correction,
            "clamp_trust_ratio": clamp_trust_ratio,
        }
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Performs one optimization step; ``closure`` re-evaluates the model and returns the loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr = group["lr"]
            eps = group["eps"]
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")

                state = self.state[p]
                if not state:
                    # A tensor step keeps bias correction inside the traced graph (no per-step constants on XLA).
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                if state["step"].device != p.device:
                    # Optimizer.load_state_dict leaves "step" on the CPU; keep it beside the parameter.
                    state["step"] = state["step"].to(p.device)
                state["step"].add_(1.0)
                step = state["step"]
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

                exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)

                if group["bias_correction"]:
                    m_hat = exp_avg / _bias_correction(beta1, step).to(exp_avg.dtype)
                    v_hat = exp_avg_sq / _bias_correction(beta2, step).to(exp_avg_sq.dtype)
                else:
                    m_hat, v_hat = exp_avg, exp_avg_sq

                update = m_hat / (v_hat.sqrt() + eps)
                if weight_decay != 0.0:
                    update = update.add(p, alpha=weight_decay)

                norm_dtype = torch.promote_types(p.dtype, torch.float32)  # bf16 weights: norms in fp32
                weight_norm = torch.linalg.vector_norm(p, dtype=norm_dtype)
                update_norm = torch.linalg.vector_norm(update, dtype=norm_dtype)
                one = torch.ones_like(weight_norm)
                both_positive = (weight_norm > 0) & (update_norm > 0)
                # where() evaluates both branches: guard the division so a zero update norm gives no inf/nan.
                trust_ratio = torch.where(
                    both_positive, weight_norm / torch.where(both_positive, update_norm, one), one
                )
                if group["clamp_trust_ratio"]:
                    trust_ratio = torch.minimum(trust_ratio, one)

                p.add_(update * (trust_ratio * -lr).to(update.dtype))
        return loss
