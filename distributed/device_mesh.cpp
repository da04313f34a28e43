#include "ember/distributed/device_mesh.h"

#include <algorithm>

#include "ember/core/shape.h"
#include "ember/distributed/distributed.h"

namespace ember::distributed {

int64_t DeviceMesh::size(int dim) const { return shape_[check_dim(dim)]; }

int64_t DeviceMesh::size() const { return numel_of(IntArrayRef(shape_)); }

int DeviceMesh::check_dim(int dim) const {
  EMBER_CHECK(dim >= 0 && dim < ndim(), "DeviceMesh: dim ", dim, " is not in [0, ", ndim(),
              ") of the mesh of shape ", IntArrayRef(shape_));
  return dim;
}

int DeviceMesh::dim_index(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) {
    std::string known;
    for (const std::string& n : names_) known += (known.empty() ? "\"" : ", \"") + n + "\"";
    throw Error(ember::detail::str_cat("DeviceMesh: no dim named \"", name, "\" (the mesh's dims are ",
                                       known.empty() ? std::string("unnamed") : known, ")"));
  }
  return static_cast<int>(it - names_.begin());
}

const std::shared_ptr<ProcessGroup>& DeviceMesh::get_group(int dim) const { return groups_[check_dim(dim)]; }

const std::shared_ptr<ProcessGroup>& DeviceMesh::get_group(const std::string& dim_name) const {
  return groups_[dim_index(dim_name)];
}

DeviceMesh init_device_mesh(const std::string& device_type, std::vector<int64_t> mesh_shape,
                            std::vector<std::string> mesh_dim_names) {
  const char* op = "init_device_mesh";
  EMBER_CHECK(device_type == "cpu" || device_type == "cuda", op,
              ": device_type must be \"cpu\" or \"cuda\", got \"", device_type, "\"");
  EMBER_CHECK(!mesh_shape.empty(), op, ": the mesh needs at least one dim");
  for (int64_t s : mesh_shape)
    EMBER_CHECK(s > 0, op, ": mesh sizes must be positive, got ", IntArrayRef(mesh_shape));
  EMBER_CHECK(mesh_dim_names.empty() || mesh_dim_names.size() == mesh_shape.size(), op, ": ",
              mesh_dim_names.size(), " names for a mesh of ", mesh_shape.size(), " dims");
  for (size_t i = 0; i < mesh_dim_names.size(); ++i)
    EMBER_CHECK(std::count(mesh_dim_names.begin(), mesh_dim_names.end(), mesh_dim_names[i]) == 1, op,
                ": the dim name \"", mesh_dim_names[i], "\" is given twice");
  if (!is_initialized()) init_process_group(device_type == "cuda" ? "nccl" : "gloo");
  const int world = get_world_size(), rank = get_rank();
  EMBER_CHECK(numel_of(IntArrayRef(mesh_shape)) == world, op, ": a mesh of shape ", IntArrayRef(mesh_shape),
              " holds ", numel_of(IntArrayRef(mesh_shape)), " ranks, the world has ", world);

  DeviceMesh mesh;
  mesh.device_type_ = device_type;
  mesh.shape_ = mesh_shape;
  mesh.names_ = std::move(mesh_dim_names);
  const int nd = mesh.ndim();
  // Row-major strides: rank = sum of coordinate[d] * stride[d].
  std::vector<int64_t> stride(nd, 1);
  for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * mesh_shape[d + 1];
  for (int d = 0; d < nd; ++d) mesh.coordinate_.push_back(rank / stride[d] % mesh_shape[d]);
  // Along each dim, every line of ranks becomes a group; every rank makes all of them, in the
  // same order (new_group is collective), and keeps its own.
  for (int d = 0; d < nd; ++d) {
    std::shared_ptr<ProcessGroup> mine;
    for (int start = 0; start < world; ++start) {
      if (start / stride[d] % mesh_shape[d] != 0) continue;  // each line from its first rank
      std::vector<int> line;
      for (int64_t i = 0; i < mesh_shape[d]; ++i) line.push_back(static_cast<int>(start + i * stride[d]));
      std::shared_ptr<ProcessGroup> g = new_group(line);
      if (g) mine = g;
    }
    mesh.groups_.push_back(mine);
  }
  return mesh;
}

}  // namespace ember::distributed
