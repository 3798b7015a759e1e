
// qv_ros build (scripts/ros2_control_stack.sh): the pinned pal_statistics (2.2) has no keyed registries
// (REGISTER_ENTITY ... of pal_statistics >= 2.3): ros2_control's introspection is compiled out, its
// arguments still evaluated; controller_manager then publishes no ~/introspection_data nor ~/statistics.
#ifndef REGISTER_ENTITY
namespace hardware_interface
{
template <class... Args>
inline void introspection_disabled(Args &&...) {}
}  // namespace hardware_interface
#undef START_PUBLISH_THREAD
#undef PUBLISH_ASYNC_STATISTICS
#define REGISTER_ENTITY(...) hardware_interface::introspection_disabled(__VA_ARGS__)
#define UNREGISTER_ENTITY(...) hardware_interface::introspection_disabled(__VA_ARGS__)
#define CLEAR_ALL_REGISTRIES() hardware_interface::introspection_disabled()
#define INITIALIZE_REGISTRY(...) hardware_interface::introspection_disabled(__VA_ARGS__)
#define START_PUBLISH_THREAD(...) hardware_interface::introspection_disabled(__VA_ARGS__)
#define PUBLISH_ASYNC_STATISTICS(...) hardware_interface::introspection_disabled(__VA_ARGS__)
#endif
