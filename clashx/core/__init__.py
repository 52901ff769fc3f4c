"""Shared foundations: array types, parameter spaces, the MuJoCo C batch helper, MJX import, engine choice, model-folder I/O."""

from ._params import ParamSpace as ParamSpace
