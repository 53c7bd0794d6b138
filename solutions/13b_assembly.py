"""第 13b 课：阶段组装 —— Lesson 13b: stage assembly, MiniMind's block and model.

Lessons 10–13 built the pieces; here they are wired together as MiniMind's
model_minimind.py does. Fill in the three graded forwards:

  self_attn  Attention.forward: q/k/v projections, heads and grouped-query kv heads,
             the q/k norms, RoPE on q and k, the KV cache (new keys after the cached
             ones, on the sequence dimension), the masks, and o_proj
  block      MiniMindBlock.forward: pre-norm, attention, residual, pre-norm, the FFN
             (FeedForward or MOEFeedForward), residual
  model      CourseMiniMindForCausalLM.forward: embeddings, the RoPE rows of the new
             tokens (they start at the cache's length), the blocks, the final norm,
             lm_head; the logits, each layer's cache and the sum of every MoE layer's
             aux loss

The pieces come from `model_parts` (your lessons 10–13; when graded, the grader's
own pieces stand in for them so that only the wiring counts here). Shapes follow
MiniMind: hidden states [B, S, H]; q [B, S, n_heads, head_dim]; k and v
[B, S, n_kv_heads, head_dim]; a layer's cache is (k, v), each [B, past + S,
n_kv_heads, head_dim]; the padding mask [B, past + S] has 1 for a real token.
Check your work with `grader check 13b_assembly.py`.
"""
import math
import torch
import torch.nn.functional as F
from torch import nn

from model_parts import (FeedForward, MOEFeedForward, RMSNorm, apply_rotary_pos_emb,
                         precompute_freqs_cis, repeat_kv, rope_position_embeddings)


class AssemblyConfig:
    """MiniMindConfig's fields that the block and the model read (given): the defaults
    below, any of them changed by a keyword argument."""
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vocab_size: int = 128
    max_position_embeddings: int = 256
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    intermediate_size: int = 192
    hidden_act: str = "silu"
    use_moe: bool = False
    num_experts: int = 4
    num_experts_per_tok: int = 1
    norm_topk_prob: bool = True
    router_aux_loss_coef: float = 5e-4

    def __init__(self, **changed):
        for name, value in changed.items():
            if not hasattr(AssemblyConfig, name):
                raise TypeError(f"AssemblyConfig has no field {name}")
            setattr(self, name, value)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


class Attention(nn.Module):
    """MiniMind's Attention (part "self_attn"): [B, S, H] -> ([B, S, H], cache)."""

    def __init__(self, config: AssemblyConfig):
        super().__init__()
        self.n_local_heads = config.num_attention_heads
        self.n_local_kv_heads = config.num_key_value_heads
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.n_local_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.n_local_kv_heads * self.head_dim,
                                bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.n_local_kv_heads * self.head_dim,
                                bias=False)
        self.o_proj = nn.Linear(self.n_local_heads * self.head_dim, config.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, x: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        """(output [B, S, H], (k, v) when use_cache else None)."""
        ### BEGIN SOLUTION
        bsz, seq_len, _ = x.shape
        xq, xk, xv = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        xq = xq.view(bsz, seq_len, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        xq, xk = self.q_norm(xq), self.k_norm(xk)
        cos, sin = position_embeddings
        xq, xk = apply_rotary_pos_emb(xq, xk, cos, sin)
        if past_key_value is not None:
            xk = torch.cat([past_key_value[0], xk], dim=1)
            xv = torch.cat([past_key_value[1], xv], dim=1)
        past_kv = (xk, xv) if use_cache else None
        xq = xq.transpose(1, 2)
        xk = repeat_kv(xk, self.n_rep).transpose(1, 2)
        xv = repeat_kv(xv, self.n_rep).transpose(1, 2)
        scores = (xq @ xk.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores[:, :, :, -seq_len:] += torch.full((seq_len, seq_len), float("-inf"),
                                                 device=scores.device).triu(1)
        if attention_mask is not None:
            scores += (1.0 - attention_mask.unsqueeze(1).unsqueeze(2)) * -1e9
        output = F.softmax(scores.float(), dim=-1).type_as(xq) @ xv
        output = output.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.o_proj(output), past_kv
        ### END SOLUTION


class MiniMindBlock(nn.Module):
    """One decoder layer (part "block"): ([B, S, H], cache) out."""

    def __init__(self, layer_id: int, config: AssemblyConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        if config.use_moe:
            self.mlp = MOEFeedForward(config.hidden_size, config.intermediate_size,
                                      config.num_experts, config.num_experts_per_tok,
                                      config.hidden_act, config.norm_topk_prob,
                                      config.router_aux_loss_coef)
        else:
            self.mlp = FeedForward(config.hidden_size, config.intermediate_size,
                                   config.hidden_act)

    def forward(self, hidden_states: torch.Tensor, position_embeddings: tuple,
                past_key_value: tuple = None, use_cache: bool = False,
                attention_mask: torch.Tensor = None) -> tuple:
        ### BEGIN SOLUTION
        residual = hidden_states
        hidden_states, present_key_value = self.self_attn(
            self.input_layernorm(hidden_states), position_embeddings,
            past_key_value, use_cache, attention_mask)
        hidden_states = hidden_states + residual
        hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        return hidden_states, present_key_value
        ### END SOLUTION


class CourseMiniMindForCausalLM(nn.Module):
    """MiniMindModel and its lm_head (part "model"): (logits, caches, aux_loss)."""

    def __init__(self, config: AssemblyConfig):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([MiniMindBlock(i, config)
                                     for i in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        freqs_cos, freqs_sin = precompute_freqs_cis(config.head_dim,
                                                    config.max_position_embeddings,
                                                    config.rope_theta)
        self.register_buffer("freqs_cos", freqs_cos, persistent=False)
        self.register_buffer("freqs_sin", freqs_sin, persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor = None,
                past_key_values: list = None, use_cache: bool = False) -> tuple:
        """(logits [B, S, vocab], a list of each layer's cache, the summed aux loss)."""
        ### BEGIN SOLUTION
        past_key_values = past_key_values or [None] * len(self.layers)
        hidden_states = self.embed_tokens(input_ids)
        position_embeddings = rope_position_embeddings(self.freqs_cos, self.freqs_sin,
                                                       input_ids.shape[1], past_key_values[0])
        presents = []
        for layer, past_key_value in zip(self.layers, past_key_values):
            hidden_states, present = layer(hidden_states, position_embeddings,
                                           past_key_value=past_key_value,
                                           use_cache=use_cache, attention_mask=attention_mask)
            presents.append(present)
        hidden_states = self.norm(hidden_states)
        aux_loss = sum([layer.mlp.aux_loss for layer in self.layers
                        if isinstance(layer.mlp, MOEFeedForward)],
                       hidden_states.new_zeros(1).squeeze())
        return self.lm_head(hidden_states), presents, aux_loss
        ### END SOLUTION
