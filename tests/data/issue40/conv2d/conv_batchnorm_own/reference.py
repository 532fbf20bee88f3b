import jax
import jax.numpy as jnp

# A task of our own in a third style: named integers, the weights first, a 5x3 kernel, the
# batch statistics written out as sums of squares about the mean.
IMAGES = 3
IN_CH = 8
OUT_CH = 16
ROWS = 20
COLS = 132


def get_inputs():
    kk, ki, kg = jax.random.split(jax.random.PRNGKey(3), 3)
    kernel = jax.random.normal(kk, (OUT_CH, IN_CH, 5, 3), jnp.float32) * 0.2
    gamma = 1.0 + 0.1 * jax.random.normal(kg, (OUT_CH,), jnp.float32)
    beta = jnp.linspace(-0.5, 0.5, OUT_CH, dtype=jnp.float32)
    images = jax.random.uniform(ki, (IMAGES, IN_CH, ROWS, COLS), jnp.float32)
    return [kernel, gamma, beta, images], []


def computation(kernel, gamma, beta, images):
    y = jax.lax.conv_general_dilated(images, kernel, (1, 1), 'VALID')
    y = jax.nn.relu(y)
    count = y.shape[0] * y.shape[2] * y.shape[3]
    mean = jnp.sum(y, axis=(0, 2, 3)) / count
    centred = y - mean[None, :, None, None]
    var = jnp.sum(centred * centred, axis=(0, 2, 3)) / count
    scale = gamma * jax.lax.rsqrt(var + 1e-5)
    return centred * scale[None, :, None, None] + beta[None, :, None, None]
