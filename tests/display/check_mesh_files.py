#!/usr/bin/env python3
"""Independent readers for molaccel's mesh files, from the specifications, standard library only.

    check_mesh_files.py glb|ply|obj FILE EXPECTED_TRIANGLES

glb: glTF 2.0 binary container (header, JSON and BIN chunks, 4-byte alignment), buffer views inside
the buffer, accessors inside their views and aligned, POSITION min/max equal to the data, indices
below the vertex count, unit normals, materials and meshes referenced exist. ply: binary
little-endian header, vertex and face elements, every face a triangle with indices in range, the
file fully consumed. obj: v/vn/f statements, indices in range, the mtllib file and its materials.
Exit status 0 when the file is good, 1 with a message otherwise.
"""
import json
import math
import os
import struct
import sys

COMPONENT_SIZE = {5120: 1, 5121: 1, 5122: 2, 5123: 2, 5125: 4, 5126: 4}
COMPONENT_FORMAT = {5120: "b", 5121: "B", 5122: "h", 5123: "H", 5125: "I", 5126: "f"}
TYPE_COUNT = {"SCALAR": 1, "VEC2": 2, "VEC3": 3, "VEC4": 4, "MAT4": 16}


def fail(message):
    print("check_mesh_files: " + message, file=sys.stderr)
    sys.exit(1)


def require(condition, message):
    if not condition:
        fail(message)


def read_accessor(doc, binary, index):
    acc = doc["accessors"][index]
    view = doc["bufferViews"][acc["bufferView"]]
    size = COMPONENT_SIZE[acc["componentType"]]
    comps = TYPE_COUNT[acc["type"]]
    offset = acc.get("byteOffset", 0)
    stride = view.get("byteStride", size * comps)
    require(offset % size == 0, "accessor %d: byteOffset not aligned" % index)
    require((view.get("byteOffset", 0) + offset) % size == 0, "accessor %d: data not aligned" % index)
    need = offset + stride * (acc["count"] - 1) + size * comps if acc["count"] else 0
    require(need <= view["byteLength"], "accessor %d: %d bytes past a view of %d" % (index, need, view["byteLength"]))
    start = view.get("byteOffset", 0) + offset
    fmt = "<" + COMPONENT_FORMAT[acc["componentType"]] * comps
    return [struct.unpack_from(fmt, binary, start + i * stride) for i in range(acc["count"])]


def as_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check_glb(path):
    data = open(path, "rb").read()
    require(len(data) >= 20, "shorter than a glb header")
    magic, version, length = struct.unpack_from("<III", data, 0)
    require(magic == 0x46546C67, "magic is not glTF")
    require(version == 2, "version %d, not 2" % version)
    require(length == len(data), "header length %d, file %d bytes" % (length, len(data)))
    json_length, json_type = struct.unpack_from("<II", data, 12)
    require(json_type == 0x4E4F534A, "first chunk is not JSON")
    require(json_length % 4 == 0, "JSON chunk length not a multiple of 4")
    doc = json.loads(data[20:20 + json_length].decode("utf-8"))
    offset = 20 + json_length
    require(offset + 8 <= len(data), "no BIN chunk")
    bin_length, bin_type = struct.unpack_from("<II", data, offset)
    require(bin_type == 0x004E4942, "second chunk is not BIN")
    require(bin_length % 4 == 0, "BIN chunk length not a multiple of 4")
    require(offset + 8 + bin_length == len(data), "chunks do not end at the end of the file")
    binary = data[offset + 8:offset + 8 + bin_length]
    require(doc["asset"]["version"] == "2.0", "asset.version is not 2.0")
    require(len(doc["buffers"]) == 1 and "uri" not in doc["buffers"][0], "glb needs one embedded buffer")
    buffer_length = doc["buffers"][0]["byteLength"]
    require(buffer_length <= bin_length and bin_length - buffer_length < 4, "buffer length vs BIN chunk")
    for i, view in enumerate(doc["bufferViews"]):
        require(view["buffer"] == 0, "view %d: unknown buffer" % i)
        require(view.get("byteOffset", 0) + view["byteLength"] <= buffer_length, "view %d past the buffer" % i)
    triangles = 0
    for node in doc["scenes"][doc.get("scene", 0)]["nodes"]:
        require("mesh" in doc["nodes"][node], "node %d has no mesh" % node)
    for m, mesh in enumerate(doc["meshes"]):
        for prim in mesh["primitives"]:
            require(prim.get("mode", 4) == 4, "mesh %d: not triangles" % m)
            require(prim["material"] < len(doc["materials"]), "mesh %d: unknown material" % m)
            pos_acc = doc["accessors"][prim["attributes"]["POSITION"]]
            require(pos_acc["componentType"] == 5126 and pos_acc["type"] == "VEC3", "POSITION is not float VEC3")
            positions = read_accessor(doc, binary, prim["attributes"]["POSITION"])
            for axis in range(3):
                lo = min(p[axis] for p in positions)
                hi = max(p[axis] for p in positions)
                require(as_f32(pos_acc["min"][axis]) == lo and as_f32(pos_acc["max"][axis]) == hi,
                        "mesh %d: POSITION min/max differ from the data" % m)
            normals = read_accessor(doc, binary, prim["attributes"]["NORMAL"])
            require(len(normals) == len(positions), "mesh %d: NORMAL count" % m)
            for n in normals:
                require(abs(math.sqrt(n[0] ** 2 + n[1] ** 2 + n[2] ** 2) - 1) < 1e-4, "mesh %d: normal not unit" % m)
            idx_acc = doc["accessors"][prim["indices"]]
            require(idx_acc["componentType"] in (5121, 5123, 5125) and idx_acc["type"] == "SCALAR", "index type")
            view = doc["bufferViews"][idx_acc["bufferView"]]
            require("byteStride" not in view, "index view with a stride")
            indices = [i[0] for i in read_accessor(doc, binary, prim["indices"])]
            require(len(indices) % 3 == 0, "mesh %d: index count not a multiple of 3" % m)
            require(max(indices) < len(positions), "mesh %d: index past the vertices" % m)
            triangles += len(indices) // 3
    return triangles


def check_ply(path):
    data = open(path, "rb").read()
    end = data.find(b"end_header\n")
    require(data.startswith(b"ply\n") and end > 0, "not a PLY file")
    header = data[:end].decode("ascii").splitlines()
    require("format binary_little_endian 1.0" in header, "not binary little-endian 1.0")
    elements = []
    for line in header:
        words = line.split()
        if words and words[0] == "element":
            elements.append((words[1], int(words[2]), []))
        elif words and words[0] == "property":
            elements[-1][2].append(words[1:])
    require([e[0] for e in elements] == ["vertex", "face"], "elements are not vertex, face")
    scalar = {"float": "f", "uchar": "B", "uint": "I", "int": "i"}
    vertex_format = "<" + "".join(scalar[p[0]] for p in elements[0][2])
    names = [p[1] for p in elements[0][2]]
    require(names[:6] == ["x", "y", "z", "nx", "ny", "nz"], "vertex properties")
    offset = end + len("end_header\n")
    vertex_size = struct.calcsize(vertex_format)
    vertices = elements[0][1]
    for v in range(vertices):
        values = struct.unpack_from(vertex_format, data, offset + v * vertex_size)
        require(abs(math.sqrt(values[3] ** 2 + values[4] ** 2 + values[5] ** 2) - 1) < 1e-4, "normal not unit")
    offset += vertices * vertex_size
    require(elements[1][2] == [["list", "uchar", "uint", "vertex_indices"]], "face property")
    for f in range(elements[1][1]):
        require(offset < len(data), "file ends inside the faces")
        count = data[offset]
        require(count == 3, "face %d has %d vertices" % (f, count))
        indices = struct.unpack_from("<3I", data, offset + 1)
        require(max(indices) < vertices, "face %d: index past the vertices" % f)
        offset += 13
    require(offset == len(data), "%d bytes after the faces" % (len(data) - offset))
    return elements[1][1]


def check_obj(path):
    vertices, normals, triangles = 0, 0, 0
    materials_used, mtllib = set(), None
    for number, line in enumerate(open(path, encoding="ascii"), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] == "v":
            require(len(words) == 4 and all(math.isfinite(float(w)) for w in words[1:]), "line %d: v" % number)
            vertices += 1
        elif words[0] == "vn":
            n = [float(w) for w in words[1:]]
            require(abs(math.sqrt(sum(x * x for x in n)) - 1) < 1e-4, "line %d: normal not unit" % number)
            normals += 1
        elif words[0] == "f":
            require(len(words) == 4, "line %d: not a triangle" % number)
            for corner in words[1:]:
                v, t, n = corner.split("/")
                require(t == "" and 1 <= int(v) <= vertices and 1 <= int(n) <= normals, "line %d: index" % number)
            triangles += 1
        elif words[0] == "mtllib":
            mtllib = words[1]
        elif words[0] == "usemtl":
            materials_used.add(words[1])
        elif words[0] not in ("o", "g", "s"):
            fail("line %d: unknown statement %s" % (number, words[0]))
    require(mtllib is not None, "no mtllib")
    mtl_path = os.path.join(os.path.dirname(path), mtllib)
    defined = set(l.split()[1] for l in open(mtl_path, encoding="ascii") if l.startswith("newmtl "))
    require(materials_used <= defined, "materials used but not defined: %s" % (materials_used - defined))
    return triangles


def main():
    if len(sys.argv) != 4:
        fail("usage: check_mesh_files.py glb|ply|obj FILE EXPECTED_TRIANGLES")
    kind, path, expected = sys.argv[1], sys.argv[2], int(sys.argv[3])
    triangles = {"glb": check_glb, "ply": check_ply, "obj": check_obj}[kind](path)
    require(triangles == expected, "%d triangles, expected %d" % (triangles, expected))


if __name__ == "__main__":
    main()
