"""Layer 7: experiments on the layers below: the paper's figures, the headline table, audits."""
