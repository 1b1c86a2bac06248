"""Step 5's experiment (notebook 05): can a copy really run under compute on this machine?

- ``lab``: the entry, ``run_experiment(run_mode=...)`` (dry run, real CPU, real GPU), and TODO 5's
  checks;
- ``cpu`` and ``gpu``: the two engines (threads and a copy on one side, CUDA streams on the other);
- ``evidence``: overlap read from completion times, the controls and their bounds;
- ``schema`` and ``results``: an honest result file (what ran, where, what it proves) and its
  checks;
- ``device`` (driver facts), ``load`` (other work on the machine), ``sweep`` (pipeline sweep and
  bandwidth curve, measured or replayed from a recorded run) and ``plots`` (the figures).
"""
