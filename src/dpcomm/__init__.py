"""dpcomm: differential privacy for data-dependent communication patterns.

Implements the system of "Mitigating Leakage from Data Dependent Communications in
Decentralized Computing using Differential Privacy" (Ladjel, Anciaux, Bellet, Scerri).
"""

from dpcomm.errors import DpcommError, InvalidParameterError

__all__ = ["DpcommError", "InvalidParameterError", "__version__"]
__version__ = "0.1.0"
