// init_device_mesh over Gloo with 4 processes in meshes of 1, 2 and 3 dims: each rank's
// coordinate is its row-major index, and the group along each dim holds exactly the ranks that
// differ from it only there (checked by a sum of global ranks and by get_global_rank). A mesh
// made before any process group makes the default one. The argument errors.
#include <ember/distributed/device_mesh.h>

#include <cstdlib>
#include <sstream>

#include "dist_test_util.h"

namespace ember::testing::dist {
namespace {

namespace d = ember::distributed;

std::vector<int64_t> mesh_shape_from_env() {
  std::vector<int64_t> shape;
  std::stringstream in(std::getenv("MESH_SHAPE"));
  for (std::string s; std::getline(in, s, ',');) shape.push_back(std::stoll(s));
  return shape;
}

void expect(bool ok, const std::string& what) {
  if (!ok) throw Error(what);
}

DIST_WORKER(device_mesh_groups) {
  if (std::string(std::getenv("MESH_INIT_FIRST")) == "1") d::init_process_group("gloo");
  const std::vector<int64_t> shape = mesh_shape_from_env();
  std::vector<std::string> names;
  for (size_t i = 0; i < shape.size(); ++i) names.push_back("dim" + std::to_string(i));
  d::DeviceMesh mesh = d::init_device_mesh("cpu", shape, names);
  const int rank = d::get_rank(), world = d::get_world_size();
  expect(mesh.size() == world && mesh.ndim() == static_cast<int>(shape.size()), "mesh size");
  std::vector<int64_t> stride(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) stride[i] = stride[i + 1] * shape[i + 1];
  for (int dim = 0; dim < mesh.ndim(); ++dim) {
    const int64_t c = rank / stride[dim] % shape[dim];
    expect(mesh.get_coordinate()[dim] == c && mesh.get_local_rank(names[dim]) == c,
           "coordinate along " + names[dim]);
    const auto& g = mesh.get_group(names[dim]);
    expect(g && g == mesh.get_group(dim) && g->size() == shape[dim] && g->rank() == c,
           "group along " + names[dim]);
    // The line through this rank along dim: rank + (i - c) * stride.
    int64_t expected_sum = 0;
    for (int64_t i = 0; i < shape[dim]; ++i) {
      const int64_t member = rank + (i - c) * stride[dim];
      expected_sum += member;
      expect(d::get_global_rank(g, static_cast<int>(i)) == member,
             "member " + std::to_string(i) + " of " + names[dim]);
    }
    Tensor t = full({1}, static_cast<double>(rank), kInt64);
    d::all_reduce(t, d::ReduceOp::SUM, g);
    expect(t.item<int64_t>() == expected_sum, "sum of the global ranks along " + names[dim]);
  }
  bool threw = false;
  try {
    d::init_device_mesh("cpu", {world + 1});
  } catch (const Error& e) {
    threw = std::string(e.what()).find("the world has " + std::to_string(world)) != std::string::npos;
  }
  expect(threw, "a mesh of the wrong size should say the world's size");
}

struct MeshCase {
  const char* shape;
  const char* init_first;
};

class DeviceMeshGroups : public ::testing::TestWithParam<MeshCase> {};

TEST_P(DeviceMeshGroups, EachDimsGroupIsItsLine) {
  run_workers("device_mesh_groups", 4,
              {{"MESH_SHAPE", GetParam().shape}, {"MESH_INIT_FIRST", GetParam().init_first}});
}
INSTANTIATE_TEST_SUITE_P(Gloo, DeviceMeshGroups,
                         ::testing::Values(MeshCase{"4", "1"}, MeshCase{"2,2", "1"}, MeshCase{"2,2", "0"},
                                           MeshCase{"2,1,2", "1"}, MeshCase{"1,2,2", "1"}),
                         [](const auto& info) {
                           std::string name =
                               std::string("shape_") + info.param.shape +
                               (info.param.init_first[0] == '1' ? "" : "_makes_the_default_group");
                           std::replace(name.begin(), name.end(), ',', 'x');
                           return name;
                         });

TEST(DeviceMeshErrors, Arguments) {
  EXPECT_EMBER_ERROR(d::init_device_mesh("tpu", {2}), "init_device_mesh", "device_type");
  EXPECT_EMBER_ERROR(d::init_device_mesh("cpu", {}), "init_device_mesh", "at least one dim");
  EXPECT_EMBER_ERROR(d::init_device_mesh("cpu", {2, 0}), "init_device_mesh", "positive");
  EXPECT_EMBER_ERROR(d::init_device_mesh("cpu", {2, 2}, {"dp"}), "init_device_mesh",
                     "1 names for a mesh of 2 dims");
  EXPECT_EMBER_ERROR(d::init_device_mesh("cpu", {2, 2}, {"dp", "dp"}), "init_device_mesh",
                     "\"dp\" is given twice");
}

}  // namespace
}  // namespace ember::testing::dist
