"""Tasks, the built-in suite, and everything that runs kernels.

A library: nothing here imports the agents, the screens, the themes or the app. Modules that
import jax say so in their docstring; the rest are safe for the UI process.
"""
