"""Executors: where the planned runs of an experiment train (``local``, ``ray``, ``slurm``).

The experiment runner (:mod:`cartomap.experiments.runner`) hands every batch of runs it can train
now to an executor, waits for the batch, and plans again (a later run may depend on earlier
results, as Model 1 on the pruning folds). Each run is an ordinary resumable run of the shared run
store, so every executor gives the same runs and results; only the place and the parallelism differ:

* :mod:`.local`: one run after another in the experiment's own process (the default; no extra package);
* :mod:`.ray_tasks`: one Ray task per run with the CPUs / GPU it asks for, on a local Ray started for
  the experiment or an existing cluster (``pip install 'cartomap[ray]'``);
* :mod:`.slurm`: one SLURM job per run, a batch submitted as a job array through submitit
  (``pip install 'cartomap[slurm]'``); without ``srun`` submitit runs the jobs as local processes.

:mod:`.worker` is what a Ray task or SLURM job runs; :mod:`.base` holds the contract and the
install check; :mod:`.registry` names them (opener, one-line description, package) and opens the executor of an
:class:`cartomap.config.ExecutorConfig`.
"""
