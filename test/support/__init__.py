"""What the tests share: ``ros`` (nodes in processes of their own on this run's private ROS domain, a
client node, recorders), ``cell`` (the cell's processes and configs), ``identify`` (the arm's
identification inputs), ``synthetic_hand`` and ``cell_runs`` (simulated problems and recordings),
``cmd_vel_publisher`` (a node run as its own process), ``interfaces`` (the interface packages' type
hashes, computed with rosbags, and round trips), and ``scenarios`` (the fault, load and cell
scenarios the tests and ``benchmarks/`` both run). Imported as ``support.<module>`` (``test/`` is on
``sys.path``: pytest puts it there for ``test/conftest.py``; the benchmarks add it themselves).
"""
