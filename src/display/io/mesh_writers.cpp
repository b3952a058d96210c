// Mesh files: glTF 2.0 binary, PLY (binary little-endian), OBJ + MTL. Every file is written
// atomically (write_file_atomically: temporary file beside the target, then rename).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "molaccel/display.hpp"

namespace molaccel::display {
namespace {

std::vector<const ScenePart*> drawable_parts(const std::filesystem::path& path, const Scene& scene) {
  std::vector<const ScenePart*> parts;
  for (const ScenePart& p : scene.parts) {
    if (p.mesh.empty()) continue;
    if (p.mesh.positions.size() != p.mesh.normals.size())
      throw Error(fmt::format("{}: part '{}' has {} positions and {} normals", path.string(), p.name,
                              p.mesh.positions.size() / 3, p.mesh.normals.size() / 3));
    parts.push_back(&p);
  }
  if (parts.empty()) throw InputError(path.string(), 0, "nothing to write: the scene has no triangle");
  return parts;
}

void put(std::string& out, const void* data, std::size_t bytes) {
  out.append(static_cast<const char*>(data), bytes);
}
void put_u32(std::string& out, std::uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
                              static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
  put(out, b, 4);
}
void put_f32(std::string& out, float f) {
  std::uint32_t v;
  std::memcpy(&v, &f, 4);
  put_u32(out, v);
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  write_file_atomically(path, [&](std::FILE* f) {
    errno = 0;
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size())
      throw InputError(path.string(), 0, fmt::format("write failed: {}", std::strerror(errno ? errno : EIO)));
  });
}

// A name usable in OBJ/MTL statements (no white space).
std::string token(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '+' ? c : '_';
  return out.empty() ? "part" : out;
}

}  // namespace

MeshFormat mesh_format_for(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".glb") return MeshFormat::glb;
  if (ext == ".ply") return MeshFormat::ply;
  if (ext == ".obj") return MeshFormat::obj;
  throw InputError(path.string(), 0, "unknown mesh format: give a .glb, .ply or .obj file name");
}

void write_scene(const std::filesystem::path& path, const Scene& scene) {
  switch (mesh_format_for(path)) {
    case MeshFormat::glb:
      return write_glb(path, scene);
    case MeshFormat::ply:
      return write_ply(path, scene);
    case MeshFormat::obj:
      return write_obj(path, scene);
  }
}

void write_glb(const std::filesystem::path& path, const Scene& scene) {
  const auto parts = drawable_parts(path, scene);
  std::string bin;
  nlohmann::json doc;
  doc["asset"] = {{"version", "2.0"}, {"generator", "molaccel"}};
  doc["scene"] = 0;
  nlohmann::json nodes = nlohmann::json::array(), meshes = nlohmann::json::array(),
                 materials = nlohmann::json::array(), accessors = nlohmann::json::array(),
                 views = nlohmann::json::array(), scene_nodes = nlohmann::json::array();
  auto add_view = [&](const void* data, std::size_t bytes, int target) {
    while (bin.size() % 4) bin.push_back('\0');  // accessors of 4-byte components stay aligned
    views.push_back({{"buffer", 0}, {"byteOffset", bin.size()}, {"byteLength", bytes}, {"target", target}});
    put(bin, data, bytes);
    return views.size() - 1;
  };
  for (const ScenePart* part : parts) {
    const Mesh& m = part->mesh;
    const std::size_t n = m.vertex_count();
    std::array<double, 3> lo, hi;
    lo.fill(std::numeric_limits<double>::infinity());
    hi.fill(-std::numeric_limits<double>::infinity());
    for (std::size_t v = 0; v < n; ++v)
      for (int x = 0; x < 3; ++x) {
        lo[x] = std::min(lo[x], static_cast<double>(m.positions[3 * v + x]));
        hi[x] = std::max(hi[x], static_cast<double>(m.positions[3 * v + x]));
      }
    const std::size_t pos_view = add_view(m.positions.data(), m.positions.size() * 4, 34962);
    accessors.push_back({{"bufferView", pos_view},
                         {"componentType", 5126},
                         {"count", n},
                         {"type", "VEC3"},
                         {"min", lo},
                         {"max", hi}});
    const std::size_t pos_accessor = accessors.size() - 1;
    const std::size_t nrm_view = add_view(m.normals.data(), m.normals.size() * 4, 34962);
    accessors.push_back({{"bufferView", nrm_view}, {"componentType", 5126}, {"count", n}, {"type", "VEC3"}});
    const std::size_t idx_view = add_view(m.indices.data(), m.indices.size() * 4, 34963);
    const auto [imin, imax] = std::minmax_element(m.indices.begin(), m.indices.end());
    accessors.push_back({{"bufferView", idx_view},
                         {"componentType", 5125},
                         {"count", m.indices.size()},
                         {"type", "SCALAR"},
                         {"min", {*imin}},
                         {"max", {*imax}}});
    const Colour& c = part->colour;
    nlohmann::json material = {
        {"name", part->name},
        {"doubleSided", true},  // a lobe cut by the grid's faces is open: its inside stays visible
        {"pbrMetallicRoughness",
         {{"baseColorFactor", {c.r, c.g, c.b, c.a}}, {"metallicFactor", 0.0}, {"roughnessFactor", 0.45}}}};
    if (c.a < 1) material["alphaMode"] = "BLEND";
    materials.push_back(material);
    meshes.push_back({{"name", part->name},
                      {"primitives",
                       {{{"attributes", {{"POSITION", pos_accessor}, {"NORMAL", pos_accessor + 1}}},
                         {"indices", accessors.size() - 1},
                         {"material", materials.size() - 1},
                         {"mode", 4}}}}});
    nodes.push_back({{"name", part->name}, {"mesh", meshes.size() - 1}});
    scene_nodes.push_back(nodes.size() - 1);
  }
  while (bin.size() % 4) bin.push_back('\0');
  doc["scenes"] = {{{"nodes", scene_nodes}}};
  doc["nodes"] = nodes;
  doc["meshes"] = meshes;
  doc["materials"] = materials;
  doc["accessors"] = accessors;
  doc["bufferViews"] = views;
  doc["buffers"] = {{{"byteLength", bin.size()}}};
  std::string json = doc.dump();
  while (json.size() % 4) json.push_back(' ');  // the JSON chunk is padded with spaces
  std::string out;
  const std::uint64_t total = 12 + 8 + json.size() + 8 + bin.size();
  if (total > std::numeric_limits<std::uint32_t>::max())
    throw Error(fmt::format("{}: {} bytes exceed the 4 GiB limit of a .glb file", path.string(), total));
  out.reserve(total);
  put_u32(out, 0x46546C67u);  // "glTF"
  put_u32(out, 2);
  put_u32(out, static_cast<std::uint32_t>(total));
  put_u32(out, static_cast<std::uint32_t>(json.size()));
  put_u32(out, 0x4E4F534Au);  // "JSON"
  out += json;
  put_u32(out, static_cast<std::uint32_t>(bin.size()));
  put_u32(out, 0x004E4942u);  // "BIN\0"
  out += bin;
  write_bytes(path, out);
}

void write_ply(const std::filesystem::path& path, const Scene& scene) {
  const auto parts = drawable_parts(path, scene);
  std::size_t vertices = 0, faces = 0;
  for (const ScenePart* p : parts) {
    vertices += p->mesh.vertex_count();
    faces += p->mesh.triangle_count();
  }
  std::string out = fmt::format(
      "ply\nformat binary_little_endian 1.0\ncomment molaccel isosurface mesh\nelement vertex {}\n"
      "property float x\nproperty float y\nproperty float z\nproperty float nx\nproperty float ny\n"
      "property float nz\nproperty uchar red\nproperty uchar green\nproperty uchar blue\nproperty uchar "
      "alpha\n"
      "element face {}\nproperty list uchar uint vertex_indices\nend_header\n",
      vertices, faces);
  auto byte = [](float v) { return static_cast<unsigned char>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f); };
  for (const ScenePart* p : parts) {
    const unsigned char rgba[4] = {byte(p->colour.r), byte(p->colour.g), byte(p->colour.b),
                                   byte(p->colour.a)};
    for (std::size_t v = 0; v < p->mesh.vertex_count(); ++v) {
      for (int x = 0; x < 3; ++x) put_f32(out, p->mesh.positions[3 * v + x]);
      for (int x = 0; x < 3; ++x) put_f32(out, p->mesh.normals[3 * v + x]);
      put(out, rgba, 4);
    }
  }
  std::uint32_t offset = 0;
  for (const ScenePart* p : parts) {
    for (std::size_t t = 0; t < p->mesh.triangle_count(); ++t) {
      out.push_back('\3');
      for (int x = 0; x < 3; ++x) put_u32(out, offset + p->mesh.indices[3 * t + x]);
    }
    offset += static_cast<std::uint32_t>(p->mesh.vertex_count());
  }
  write_bytes(path, out);
}

void write_obj(const std::filesystem::path& path, const Scene& scene) {
  const auto parts = drawable_parts(path, scene);
  std::filesystem::path mtl_path = path;
  mtl_path.replace_extension(".mtl");
  std::string mtl = "# molaccel materials\n";
  std::string obj = fmt::format("# molaccel isosurface mesh\nmtllib {}\n", mtl_path.filename().string());
  std::size_t offset = 1;  // OBJ indices are 1-based and global
  for (const ScenePart* p : parts) {
    const std::string name = token(p->name);
    const Colour& c = p->colour;
    mtl += fmt::format(
        "newmtl {}\nKa 0 0 0\nKd {:.4f} {:.4f} {:.4f}\nKs 0.4 0.4 0.4\nNs 60\nd {:.4f}\nillum 2\n", name, c.r,
        c.g, c.b, c.a);
    obj += fmt::format("o {}\nusemtl {}\n", name, name);
    const Mesh& m = p->mesh;
    for (std::size_t v = 0; v < m.vertex_count(); ++v)
      obj += fmt::format("v {} {} {}\n", m.positions[3 * v], m.positions[3 * v + 1], m.positions[3 * v + 2]);
    for (std::size_t v = 0; v < m.vertex_count(); ++v)
      obj += fmt::format("vn {} {} {}\n", m.normals[3 * v], m.normals[3 * v + 1], m.normals[3 * v + 2]);
    for (std::size_t t = 0; t < m.triangle_count(); ++t) {
      const std::size_t a = offset + m.indices[3 * t], b = offset + m.indices[3 * t + 1],
                        cc = offset + m.indices[3 * t + 2];
      obj += fmt::format("f {}//{} {}//{} {}//{}\n", a, a, b, b, cc, cc);
    }
    offset += m.vertex_count();
  }
  // Both or neither (an OutputGroup); the material file is renamed first: an OBJ that names a
  // missing MTL never appears.
  OutputGroup files;
  write_bytes(mtl_path, mtl);
  write_bytes(path, obj);
  files.commit();
}

}  // namespace molaccel::display
