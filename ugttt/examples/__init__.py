"""Worked examples of your own problems (nbs/35_your_problem); your own problems live in your own package."""
