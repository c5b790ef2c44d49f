"""UR arms: UR's published figures shipped with the project (``figures``), their description
files read when given (``description``), and the arm's MJCF built from them (``arm``,
``arm_mjcf``)."""
