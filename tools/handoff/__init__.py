"""Notebook 06: many requests through the prefill-to-decode handoff.

- ``sim``: a seeded discrete-event simulator (configuration, arrivals and faults, prefill, decode
  blocks, the link under a FIFO or fair policy, the handoff gate, the summary), run on the
  learner's own steps (TODO 6-8, on TODO 3 and 4); it holds no answer to any of them;
- ``views``: its figures, summary table and live panel.
The model, GPU and link presets it shares with notebook 02 are in :mod:`tools.presets`.
"""
