#pragma once

// torch.distributed.device_mesh: the world's ranks laid out as an n-dimensional array (row-major:
// the last dim varies fastest, so it holds neighbouring ranks, e.g. the GPUs of one node), with a
// process group along each dim, for combining data, tensor and pipeline parallelism.
//
//   auto mesh = distributed::init_device_mesh("cuda", {2, 4}, {"dp", "tp"});  // 8 ranks
//   auto tp = mesh.get_group("tp");   // this rank and the 3 others of its row
//   auto dp = mesh.get_group("dp");   // this rank and the one of its column
//   int tp_rank = mesh.get_local_rank("tp");

#include <memory>
#include <string>
#include <vector>

#include "ember/distributed/process_group.h"

namespace ember::distributed {

class DeviceMesh {
 public:
  const std::string& device_type() const { return device_type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;
  int64_t size() const;  // every rank of the mesh
  const std::vector<std::string>& mesh_dim_names() const { return names_; }
  // This rank's index along each dim (DeviceMesh.get_coordinate).
  const std::vector<int64_t>& get_coordinate() const { return coordinate_; }
  // The group of the ranks that differ from this one only along `dim` (by index or name).
  const std::shared_ptr<ProcessGroup>& get_group(int dim) const;
  const std::shared_ptr<ProcessGroup>& get_group(const std::string& dim_name) const;
  int64_t get_local_rank(int dim) const { return get_coordinate().at(check_dim(dim)); }
  int64_t get_local_rank(const std::string& dim_name) const { return get_local_rank(dim_index(dim_name)); }

 private:
  friend DeviceMesh init_device_mesh(const std::string&, std::vector<int64_t>, std::vector<std::string>);
  int check_dim(int dim) const;
  int dim_index(const std::string& name) const;

  std::string device_type_;
  std::vector<int64_t> shape_, coordinate_;
  std::vector<std::string> names_;
  std::vector<std::shared_ptr<ProcessGroup>> groups_;  // one per dim
};

// A mesh over every rank of the default group: the shape's product must be the world size, and
// names (when given) one per dim and distinct. The default group is made first when there is none
// (backend "nccl" for "cuda", else "gloo", from the environment). Every rank calls it together.
DeviceMesh init_device_mesh(const std::string& device_type, std::vector<int64_t> mesh_shape,
                            std::vector<std::string> mesh_dim_names = {});

}  // namespace ember::distributed
