"""The trainers: GRPO on TRL (synchronous or asynchronous), its loss, rollouts, tasks, held-out evaluation,
run directories and reports."""
