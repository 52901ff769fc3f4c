"""Baselines the method is measured against: MuJoCo/MJX identified (CMA-ES, mujoco.sysid, gradient), MLPs."""
