"""A deterministic discrete-event simulation of a kOps Spot cluster under this product's control (issue 12).

The product's own code runs on simulated time (``sim.kernel.Kernel``; ``core.clock.use_wall_clock`` makes every
``utcnow()`` answer the kernel's time); only I/O is replaced, by in-memory models of the services behind the adapter
ports. One seed gives one exact run. See ``docs/SIMULATION.md``.
"""
