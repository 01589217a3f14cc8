"""Validation and coercion of the configuration records (``swarp/core/config.py``)."""

import math

import pytest

from swarp import AgentConfig, ControlMode, DynamicsModel, Integrator, Obstacle, ObstacleShape, WorldConfig
from swarp.core.config import ACTION_ARITY

NAN = float("nan")
INF = float("inf")


# --- AgentConfig ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("radius", -0.1, "AgentConfig.radius must be > 0"),
        ("radius", 0.0, "AgentConfig.radius must be > 0"),
        ("radius", NAN, "AgentConfig.radius must not be NaN"),
        ("radius", INF, "AgentConfig.radius must be finite"),
        ("mass", -1.0, "AgentConfig.mass must be > 0"),
        ("mass", NAN, "AgentConfig.mass must not be NaN"),
        ("wheelbase", 0.0, "AgentConfig.wheelbase must be > 0"),
        ("max_speed", -0.5, "AgentConfig.max_speed must be >= 0"),
        ("max_speed", NAN, "AgentConfig.max_speed must not be NaN"),
        ("max_accel", -1.0, "AgentConfig.max_accel must be >= 0"),
        ("max_ang_vel", -1.0, "AgentConfig.max_ang_vel must be >= 0"),
        ("max_ang_accel", INF, "AgentConfig.max_ang_accel must be finite"),
        ("drag", -0.1, "AgentConfig.drag must be >= 0"),
        ("max_steer", -0.1, "AgentConfig.max_steer must be >= 0"),
        ("max_steer", math.pi / 2, "AgentConfig.max_steer must be < pi/2"),
        ("rear_axle_ratio", 0.0, "AgentConfig.rear_axle_ratio must be in (0, 1]"),
        ("rear_axle_ratio", 1.5, "AgentConfig.rear_axle_ratio must be in (0, 1]"),
        ("rear_axle_ratio", NAN, "AgentConfig.rear_axle_ratio must be in (0, 1]"),
        ("max_body_rate", -1.0, "AgentConfig.max_body_rate must be >= 0"),
        ("max_body_rate", INF, "AgentConfig.max_body_rate must be finite"),
    ],
)
def test_agent_config_rejects_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")):
        AgentConfig(**{field: value})


@pytest.mark.parametrize("value", ["0.1", None, True])
def test_agent_config_rejects_non_numbers(value):
    with pytest.raises(TypeError, match="AgentConfig.radius must be a number"):
        AgentConfig(radius=value)


def test_the_default_body_rate_limit_is_a_racing_flight_controllers():
    assert math.isclose(AgentConfig().max_body_rate, math.radians(2000.0))
    assert AgentConfig(model="drone", max_body_rate=0.0).max_body_rate == 0.0


def test_agent_config_accepts_zero_limits():
    cfg = AgentConfig(max_speed=0.0, max_accel=0.0, max_ang_vel=0.0, max_steer=0.0, drag=0.0, rear_axle_ratio=1.0)
    assert cfg.max_speed == 0.0 and cfg.rear_axle_ratio == 1.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("holonomic", DynamicsModel.HOLONOMIC),
        ("DIFF_DRIVE", DynamicsModel.DIFF_DRIVE),
        ("Kinematic_Bicycle", DynamicsModel.KINEMATIC_BICYCLE),
        (2, DynamicsModel.KINEMATIC_BICYCLE),
        (DynamicsModel.DIFF_DRIVE, DynamicsModel.DIFF_DRIVE),
    ],
)
def test_agent_model_coerced_from_name_or_value(name, expected):
    cfg = AgentConfig(model=name)
    assert cfg.model is expected
    assert isinstance(cfg.model, DynamicsModel)


@pytest.mark.parametrize(("name", "expected"), [("velocity", ControlMode.VELOCITY), ("ACCELERATION", 1)])
def test_ctrl_mode_coerced_from_name_or_value(name, expected):
    cfg = AgentConfig(ctrl_mode=name)
    assert cfg.ctrl_mode == expected
    assert isinstance(cfg.ctrl_mode, ControlMode)


@pytest.mark.parametrize(
    ("field", "value"),
    [("model", "tank"), ("model", 7), ("model", True), ("model", 1.0), ("ctrl_mode", "torque"), ("ctrl_mode", -1)],
)
def test_unknown_enum_names_the_field_and_choices(field, value):
    with pytest.raises(ValueError, match=rf"AgentConfig\.{field} must be one of") as info:
        AgentConfig(**{field: value})
    assert repr(value) in str(info.value)
    enum_type = DynamicsModel if field == "model" else ControlMode
    for member in enum_type:
        assert member.name in str(info.value)


def test_integrator_enum_coercion_via_stepper():
    from swarp import Stepper

    assert Stepper([AgentConfig()], device="cpu", integrator="rk4").integrator is Integrator.RK4
    assert Stepper([AgentConfig()], device="cpu", integrator=0).integrator is Integrator.EULER
    with pytest.raises(ValueError, match="integrator must be one of Integrator"):
        Stepper([AgentConfig()], device="cpu", integrator="midpoint")


@pytest.mark.parametrize("model", list(DynamicsModel))
def test_act_dim_matches_action_arity(model):
    cfg = AgentConfig(model=model)
    # Planar models take two components; the quadrotor four rotor thrusts (issue #10).
    assert cfg.act_dim == ACTION_ARITY[model] == (4 if model == DynamicsModel.DRONE else 2)


def test_agent_config_is_frozen():
    cfg = AgentConfig()
    with pytest.raises(AttributeError):
        cfg.radius = 1.0


# --- Obstacle ---------------------------------------------------------------------------------


def test_obstacle_constructors():
    circle = Obstacle.circle((1.0, 2.0), 0.5)
    assert circle.shape is ObstacleShape.CIRCLE and circle.size == (0.5, 0.0) and circle.center == (1.0, 2.0)
    box = Obstacle.box((0.0, 0.0), (1.0, 0.5), angle=0.3)
    assert box.shape is ObstacleShape.BOX and box.size == (1.0, 0.5) and box.angle == 0.3
    segment = Obstacle.segment((0.0, 0.0), (0.0, 2.0), thickness=0.1)
    assert segment.shape is ObstacleShape.SEGMENT
    assert segment.center == (0.0, 1.0)
    assert segment.size == pytest.approx((1.0, 0.1))
    assert segment.angle == pytest.approx(math.pi / 2)


def test_obstacle_shape_coerced_from_name():
    assert Obstacle("box", (0.0, 0.0), (1.0, 1.0)).shape is ObstacleShape.BOX
    assert Obstacle(3, (0.0, 0.0), (1.0, 0.0)).shape is ObstacleShape.SEGMENT


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"shape": "triangle", "center": (0, 0), "size": (1, 1)}, ValueError, r"Obstacle\.shape must be one of"),
        ({"shape": "none", "center": (0, 0), "size": (1, 1)}, ValueError, r"Obstacle\.shape must be CIRCLE"),
        ({"shape": "circle", "center": (0, 0), "size": (-1, 0)}, ValueError, r"Obstacle\.size\[0\] must be > 0"),
        ({"shape": "circle", "center": (0, 0), "size": (NAN, 0)}, ValueError, r"Obstacle\.size\[0\] must not be NaN"),
        ({"shape": "box", "center": (0, 0), "size": (1, 0)}, ValueError, r"Obstacle\.size\[1\] must be > 0"),
        ({"shape": "segment", "center": (0, 0), "size": (1, -0.1)}, ValueError, r"Obstacle\.size\[1\] must be >= 0"),
        ({"shape": "circle", "center": (NAN, 0), "size": (1, 0)}, ValueError, r"Obstacle center/angle must be finite"),
        ({"shape": "box", "center": (0, 0), "size": (1, 1), "angle": INF}, ValueError, "center/angle must be finite"),
        ({"shape": "box", "center": (0, 0, 0), "size": (1, 1)}, ValueError, "must be pairs"),
    ],
)
def test_obstacle_rejects_bad_values(kwargs, error, message):
    with pytest.raises(error, match=message):
        Obstacle(**kwargs)


def test_segment_capsule_may_have_zero_thickness():
    assert Obstacle.segment((0.0, 0.0), (1.0, 0.0)).size == (0.5, 0.0)


# --- WorldConfig ------------------------------------------------------------------------------


def test_world_bounds_half_size_expands():
    assert WorldConfig(bounds=2).bounds == (-2.0, 2.0, -2.0, 2.0)
    assert WorldConfig(bounds=(0, 3, -1, 1)).bounds == (0.0, 3.0, -1.0, 1.0)
    assert WorldConfig().bounds is None


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"bounds": -1.0}, ValueError, r"WorldConfig\.bounds must be > 0"),
        ({"bounds": NAN}, ValueError, r"WorldConfig\.bounds must not be NaN"),
        ({"bounds": (0, 1, 0)}, ValueError, r"WorldConfig\.bounds must be \(x_min, x_max, y_min, y_max\)"),
        ({"bounds": (0, 1, 0, INF)}, ValueError, r"WorldConfig\.bounds must be \(x_min"),
        ({"bounds": (1, 0, 0, 1)}, ValueError, r"WorldConfig\.bounds must satisfy x_min < x_max"),
        ({"bounds_mode": "hard"}, ValueError, r"WorldConfig\.bounds_mode must be 'soft' or 'clamp'"),
        ({"collision_k": -1.0}, ValueError, r"WorldConfig\.collision_k must be >= 0"),
        ({"collision_k": NAN}, ValueError, r"WorldConfig\.collision_k must not be NaN"),
        ({"collision_damping": -0.5}, ValueError, r"WorldConfig\.collision_damping must be >= 0"),
        ({"max_neighbors": 0}, ValueError, r"WorldConfig\.max_neighbors must be an int >= 1"),
        ({"max_neighbors": 4.0}, ValueError, r"WorldConfig\.max_neighbors must be an int >= 1"),
        ({"max_neighbors": True}, ValueError, r"WorldConfig\.max_neighbors must be an int >= 1"),
        ({"neighbor_radius": 0.0}, ValueError, r"WorldConfig\.neighbor_radius must be > 0"),
        ({"neighbor_radius": NAN}, ValueError, r"WorldConfig\.neighbor_radius must not be NaN"),
        ({"neighbor_method": "kdtree"}, ValueError, r"WorldConfig\.neighbor_method must be 'brute', 'grid'"),
        ({"grid_threshold": 0}, ValueError, r"WorldConfig\.grid_threshold must be None or an int >= 1"),
        ({"grid_threshold": True}, ValueError, r"WorldConfig\.grid_threshold must be None or an int >= 1"),
        ({"collisions": "false"}, TypeError, r"WorldConfig\.collisions must be a bool"),
        ({"collisions": 1}, TypeError, r"WorldConfig\.collisions must be a bool"),
        ({"obstacles": ("circle",)}, TypeError, r"WorldConfig\.obstacles\[0\] must be an Obstacle"),
    ],
)
def test_world_config_rejects_bad_values(kwargs, error, message):
    with pytest.raises(error, match=message):
        WorldConfig(**kwargs)


def test_world_obstacles_become_a_tuple():
    obstacles = [Obstacle.circle((0.0, 0.0), 1.0)]
    world = WorldConfig(obstacles=obstacles)
    assert isinstance(world.obstacles, tuple) and world.obstacles[0] is obstacles[0]
