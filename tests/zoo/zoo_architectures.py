"""Tiny random models of the architectures our users train, each built offline from its transformers config.

Every builder returns a model in training mode with fixed weights (seeded) and a batch that its
forward takes (labels included, so ``model(**batch).loss`` is a loss). Hidden 32, 2 layers, vocab 96: a step
of any method runs in milliseconds, and every matrix shape is small enough for an exact reference.
"""

from collections.abc import Callable

import torch
import transformers as tf

VOCAB, HIDDEN, LAYERS, HEADS, SEQ, BATCH = 96, 32, 2, 4, 6, 2
SPECIAL_TOKENS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}  # inside the tiny vocabulary


def _causal(config_cls, model_cls, **extra) -> Callable:
    def build():
        config = config_cls(
            vocab_size=VOCAB,
            hidden_size=HIDDEN,
            intermediate_size=2 * HIDDEN,
            num_hidden_layers=LAYERS,
            num_attention_heads=HEADS,
            num_key_value_heads=HEADS // 2,
            max_position_embeddings=256,
            **{**SPECIAL_TOKENS, **extra},
        )
        return model_cls(config), _lm_batch()

    return build


def _lm_batch() -> dict[str, torch.Tensor]:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def gpt2():
    config = tf.GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=256, **SPECIAL_TOKENS
    )
    return tf.GPT2LMHeadModel(config), _lm_batch()


def gptj():
    config = tf.GPTJConfig(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=256, rotary_dim=4, **SPECIAL_TOKENS
    )
    return tf.GPTJForCausalLM(config), _lm_batch()


def gpt_neox():
    config = tf.GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=256,
        **SPECIAL_TOKENS,
    )
    return tf.GPTNeoXForCausalLM(config), _lm_batch()


def bert():
    config = tf.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=2 * HIDDEN,
        max_position_embeddings=256,
        num_labels=3,
    )
    batch = _lm_batch()
    batch["labels"] = torch.tensor([0, 2])
    return tf.BertForSequenceClassification(config), batch


def t5():
    config = tf.T5Config(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        d_kv=HIDDEN // HEADS,
        d_ff=2 * HIDDEN,
        num_layers=LAYERS,
        num_heads=HEADS,
        decoder_start_token_id=0,
        pad_token_id=0,
        dropout_rate=0.0,  # T5 reads it as a number in attention too, not only through its Dropout modules
    )
    return tf.T5ForConditionalGeneration(config), _lm_batch()


def lora_qwen2():
    import peft

    model, batch = ARCHITECTURES["qwen2"]()
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], lora_dropout=0.0)
    return peft.get_peft_model(model, config), batch


ARCHITECTURES: dict[str, Callable] = {
    "gpt2": gpt2,
    "gptj": gptj,
    "gpt_neox": gpt_neox,
    "llama": _causal(tf.LlamaConfig, tf.LlamaForCausalLM),
    "qwen2": _causal(tf.Qwen2Config, tf.Qwen2ForCausalLM),
    "qwen3": _causal(tf.Qwen3Config, tf.Qwen3ForCausalLM, head_dim=HIDDEN // HEADS),
    "mistral": _causal(tf.MistralConfig, tf.MistralForCausalLM),
    "gemma": _causal(tf.GemmaConfig, tf.GemmaForCausalLM, head_dim=HIDDEN // HEADS),
    "phi3": _causal(tf.Phi3Config, tf.Phi3ForCausalLM),
    "mixtral": _causal(tf.MixtralConfig, tf.MixtralForCausalLM, num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": _causal(
        tf.Qwen2MoeConfig,
        tf.Qwen2MoeForCausalLM,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=HIDDEN,
        shared_expert_intermediate_size=HIDDEN,
    ),
    "qwen3_moe": _causal(
        tf.Qwen3MoeConfig,
        tf.Qwen3MoeForCausalLM,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=HIDDEN,
        head_dim=HIDDEN // HEADS,
    ),
    "bert": bert,
    "t5": t5,
    "lora_qwen2": lora_qwen2,
}


def build(name: str, seed: int = 0):
    """``(model, batch)`` for architecture ``name``, its weights drawn from ``seed``, its dropout off (a forward
    in training mode is then a function of the weights, so two equivalent models can be compared exactly)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model, batch = ARCHITECTURES[name]()
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model, batch
