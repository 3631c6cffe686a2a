"""Checkpoints: loading a task from one, atomic writes, exact resume, periodic saves and preemption."""
