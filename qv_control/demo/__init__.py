"""The main demo: a Panda pressing on and sliding over a MuJoCo table, run direct and over ROS."""
