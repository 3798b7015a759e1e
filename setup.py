"""ament_python package qv_ros: the Python packages qv_dynamics and qv_control."""
from glob import glob

from setuptools import find_packages, setup

package_name = "qv_ros"


def share(pattern: str, sub: str):
    files = sorted(glob(pattern))
    return (f"share/{package_name}/{sub}", files) if files else None


data_files = [
    ("share/ament_index/resource_index/packages", [f"resource/{package_name}"]),
    (f"share/{package_name}", ["package.xml"]),
]
for entry in (
    share("launch/*.launch.py", "launch"),
    share("urdf/*.urdf", "urdf"),
    share("urdf/*.xacro", "urdf"),
    share("urdf/*.md", "urdf"),
    share("config/*.yaml", "config"),
    share("config/*.rviz", "config"),
    share("config/*.xml", "config"),
):
    if entry:
        data_files.append(entry)

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(include=["qv_dynamics", "qv_dynamics.*", "qv_control", "qv_control.*"]),
    py_modules=["qv_entry"],  # the executables' entry points: signals handled before any package is imported
    data_files=data_files,
    install_requires=["setuptools", "numpy", "scipy", "pyyaml", "quadprog"],
    zip_safe=True,
    maintainer="qv_ros developers",
    maintainer_email="qv_ros@example.com",
    description="Quasi-velocity and projection-operator dynamics and hybrid force/motion control for ROS 2",
    license="BSD-3-Clause",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "qv = qv_entry:qv",
            "qv_dynamics_node = qv_entry:dynamics_node",
            "qv_sim_node = qv_entry:sim_node",
            "qv_mujoco_node = qv_entry:mujoco_node",
            "qv_controller_node = qv_entry:controller_node",
            "qv_legged_mujoco_node = qv_entry:legged_mujoco_node",
            "qv_legged_controller_node = qv_entry:legged_controller_node",
            "qv_loop_plant_node = qv_entry:loop_plant_node",
            "qv_spawner = qv_entry:spawner",
        ],
        # the packages whose compiled (numba) kernels live in their room <package>.kernels (KERNEL_MODULES there),
        # warmed into numba's disk cache by qv_dynamics.kernels.loader.warm_all (`qv warm`)
        "qv_ros.kernels": [
            "qv_dynamics = qv_dynamics.kernels",
            "qv_control = qv_control.kernels",
        ],
    },
)
