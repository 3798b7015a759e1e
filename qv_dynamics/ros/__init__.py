"""ROS 2 adapters of qv_dynamics: message conversion, parameter tables, diagnostics and the nodes.

The only place in qv_dynamics that imports rclpy or message packages."""
