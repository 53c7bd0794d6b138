"""Correct lesson 13b: a loop over the query heads, each reading its kv head
h // n_rep (no repeat_kv), the aux losses added up in a loop."""
import math
import torch
from torch import nn

from model_parts import (FeedForward, MOEFeedForward, RMSNorm, apply_rotary_pos_emb,
                         precompute_freqs_cis, rope_position_embeddings)


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
        bsz, seq_len, _ = x.shape
        xq = self.q_norm(self.q_proj(x).view(bsz, seq_len, self.n_local_heads, self.head_dim))
        xk = self.k_norm(self.k_proj(x).view(bsz, seq_len, self.n_local_kv_heads, self.head_dim))
        xv = self.v_proj(x).view(bsz, seq_len, self.n_local_kv_heads, self.head_dim)
        xq, xk = apply_rotary_pos_emb(xq, xk, *position_embeddings)
        if past_key_value is not None:
            xk = torch.cat((past_key_value[0], xk), 1)
            xv = torch.cat((past_key_value[1], xv), 1)
        past_kv = (xk, xv) if use_cache else None
        total = xk.shape[1]
        heads = []
        for h in range(self.n_local_heads):
            q, k, v = xq[:, :, h], xk[:, :, h // self.n_rep], xv[:, :, h // self.n_rep]
            s = q @ k.transpose(1, 2) / math.sqrt(self.head_dim)
            causal = torch.full((seq_len, total), float("-inf")).triu(total - seq_len + 1)
            s = s + causal
            if attention_mask is not None:
                s = s + (1.0 - attention_mask[:, None, :]) * -1e9
            heads.append(torch.softmax(s.float(), -1).type_as(q) @ v)
        output = torch.cat(heads, dim=-1)
        return self.o_proj(output), past_kv


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
        residual = hidden_states
        hidden_states, present_key_value = self.self_attn(
            self.input_layernorm(hidden_states), position_embeddings,
            past_key_value, use_cache, attention_mask)
        hidden_states = hidden_states + residual
        hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        return hidden_states, present_key_value


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
        aux_loss = hidden_states.new_zeros(())
        for layer in self.layers:
            if isinstance(layer.mlp, MOEFeedForward):
                aux_loss = aux_loss + layer.mlp.aux_loss
        return self.lm_head(hidden_states), presents, aux_loss
