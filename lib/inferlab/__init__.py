"""inferlab: the models, simulators and kernels behind the book on LLM inference optimization.

Modules are layered (see SPEC): ``units, hardware, models`` at the bottom; closed-form
models (``memory, roofline, ...``) above them; simulators and allocators above those;
``plot`` and ``widgets`` serve the notebooks and are never imported by a model module.
"""

__version__ = "0.1.0"
