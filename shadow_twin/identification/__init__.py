"""Identification of an arm's joint dynamics and drive gains from the efforts its drives report.

``shadow-twin identify`` (shadow_twin/cli/identify.py) in modules of one concept each:

* :mod:`~shadow_twin.identification.recordings`: effort recordings from bags and CSV logs, bad
  samples dropped and counted.
* :mod:`~shadow_twin.identification.signals`: zero-phase filtered central differences.
* :mod:`~shadow_twin.identification.regressor`: the model, linear in its parameters.
* :mod:`~shadow_twin.identification.samples`: recordings turned into fit samples.
* :mod:`~shadow_twin.identification.fit`: bounded least squares; each joint's presliding distance and effort delay.
* :mod:`~shadow_twin.identification.uncertainty`: intervals and the directions the data cannot identify.
* :mod:`~shadow_twin.identification.priors`: the drive gains' prior; what is implausible.
* :mod:`~shadow_twin.identification.baseline`: the plain least-squares baseline (the floor).
* :mod:`~shadow_twin.identification.links`: the links' base parameters (``--links``).
* :mod:`~shadow_twin.identification.report`: calibrated.xml, parameters.yaml, report.json.
* :mod:`~shadow_twin.identification.evaluate`: a recording's effort error under a model (offline watch).
* :mod:`~shadow_twin.identification.excitation`: Fourier-series excitation trajectories.

docs/identify.md gives the method and its sources.
"""
