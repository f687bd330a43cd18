"""Layer 6: experiments built on the layers below: the paper's figures, the planner, audits."""
