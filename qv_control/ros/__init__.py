"""ROS 2 adapters of qv_control: the controller node and the one-process bringup."""
