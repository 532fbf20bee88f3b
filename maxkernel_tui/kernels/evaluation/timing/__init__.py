"""Timing and the measured paths, on a real TPU only: the timing check (check.py) and its worker
(worker.py), the clock it may use (clock.py), production checks on the device
(device_checks.py), the measured autotuner's timer and choice (device_timer.py,
measured_choice.py), statistics (stats.py), and which measured paths this machine has
(measured_paths.py)."""
