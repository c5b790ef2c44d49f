"""Where and how a calibration searches: spaces over MJCF parameters (``search_space``), ask/tell
optimisers (``optimisers``), least squares (``least_squares``) and what the data can identify
(``identifiability``)."""
