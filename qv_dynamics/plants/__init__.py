"""Plants other than the built-in simulator: MuJoCo (soft contact, friction) built from the Pinocchio model."""
