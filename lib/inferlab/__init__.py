"""inferlab: the models, simulators and kernels behind the book on LLM inference optimization.

One package per part of the chapter (``scheduling`` 8.2, ``kvcache`` 8.3, ``compression`` 8.4,
``speculative`` 8.5, ``serving`` 8.6, ``kernels``), on top of the ground (``units, hardware, models,
datasets``) and the closed-form models of 8.1-8.2 (``memory, roofline, timeline, ...``). ``book``
presents them and nothing else imports it. ARCHITECTURE.md draws the layers; tests/test_layout.py
holds the imports to them.
"""

__version__ = "0.1.0"
