"""3t_Softmax_Cross_Entropy_Training: softmax cross-entropy over a vocabulary and its backward
(reference written for maxkernel-tui).

loss = mean over tokens of logsumexp(logits) - logits[label], in f32 from bf16 logits; int32
labels, no ignore index, no label smoothing. Judged on the loss and on the gradient of the
logits (softmax - one-hot, over the number of tokens).
"""
import jax
import jax.numpy as jnp

# Named input configurations: `bench` is the production shape (Llama-3's vocabulary of 128256,
# 4096 tokens), `check` runs on a CPU in well under a second, `heldout` is never shown to an
# agent.
CONFIGS = {
    "bench": {"tokens": 4096, "vocab": 128256},
    "check": {"tokens": 128, "vocab": 2048},
    "heldout": {"tokens": 96, "vocab": 3200},
}


def get_inputs(config="bench", seed=0):
    c = CONFIGS[config]
    key_logits, key_labels = jax.random.split(jax.random.key(seed))
    logits = (jax.random.normal(key_logits, (c["tokens"], c["vocab"])) * 2.0).astype(
        jnp.bfloat16
    )
    labels = jax.random.randint(key_labels, (c["tokens"],), 0, c["vocab"], jnp.int32)
    return (logits, labels), ()


def computation(logits, labels):
    logits32 = logits.astype(jnp.float32)
    top = jnp.max(logits32, axis=-1, keepdims=True)
    lse = jnp.log(jnp.sum(jnp.exp(logits32 - top), axis=-1)) + top[:, 0]
    picked = jnp.take_along_axis(logits32, labels[:, None], axis=-1)[:, 0]
    return jnp.mean(lse - picked)
