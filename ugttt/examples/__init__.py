"""Worked examples of your own problems (nbs/tutorials/03_your_problem); your own problems live in your own package."""
