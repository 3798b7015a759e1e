"""URDF for ros2_control: swap the hardware plugin, add the gz_ros2_control plugin and a force/torque sensor
(used by the launch files, ``launch/ros2_control.launch.py`` and ``launch/gazebo.launch.py``)."""
from __future__ import annotations

import re

from ..errors import ModelError

GZ_PLUGIN = ('<gazebo>\n'
             '  <plugin filename="gz_ros2_control-system" name="gz_ros2_control::GazeboSimROS2ControlPlugin">\n'
             '    <parameters>{params}</parameters>\n  </plugin>\n</gazebo>\n')


FT_SENSOR = ('    <sensor name="{name}">\n'
             + "".join(f'      <state_interface name="{k}.{a}"/>\n' for k in ("force", "torque") for a in "xyz")
             + '      <param name="frame_id">{frame}</param>\n    </sensor>\n')


def ros2_control_urdf(xml: str, hardware_plugin: str | None = None, gazebo_parameters: str | None = None,
                      ft_sensor: tuple[str, str] | None = None) -> str:
    """The URDF with every ``<ros2_control><hardware><plugin>`` replaced by ``hardware_plugin`` (e.g.
    ``mock_components/GenericSystem`` or ``gz_ros2_control/GazeboSimSystem``); with ``gazebo_parameters``
    (path of controllers.yaml) the gz_ros2_control system plugin appended; with ``ft_sensor`` =
    (sensor name, frame) a force/torque ``<sensor>`` block added to the first ``<ros2_control>`` unless one
    of that name exists (what force_torque_sensor_broadcaster's ``sensor_name`` reads).

    ModelError when the URDF has no ``<ros2_control>`` block (nothing for controller_manager to load)."""
    if "<ros2_control" not in xml:
        raise ModelError("URDF has no <ros2_control> block: add one (see urdf/README.md) so controller_manager "
                         "knows the joints' effort command and position/velocity/effort state interfaces")
    if hardware_plugin:
        xml = re.sub(r"(<hardware>\s*<plugin>)[^<]*(</plugin>)", rf"\g<1>{hardware_plugin}\g<2>", xml)
    if ft_sensor and f'<sensor name="{ft_sensor[0]}"' not in xml:
        i = xml.find("</ros2_control>")
        i = xml.rfind("\n", 0, i) + 1 if xml[xml.rfind("\n", 0, i) + 1:i].strip() == "" else i
        xml = xml[:i] + FT_SENSOR.format(name=ft_sensor[0], frame=ft_sensor[1]) + xml[i:]
    if gazebo_parameters:
        i = xml.rfind("</robot>")
        if i < 0:
            raise ModelError("URDF has no closing </robot> tag")
        xml = xml[:i] + GZ_PLUGIN.format(params=gazebo_parameters) + xml[i:]
    return xml

