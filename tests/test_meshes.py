"""`jc.meshes`: generated tetrahedral and triangle meshes, validation, loading (meshio)."""

import collections

import numpy as np
import pytest

import jaxcontact as jc


def faces_of(tets):
    """Each tetrahedron's 4 faces, as sorted vertex triples."""
    t = np.asarray(tets)
    return [tuple(sorted(row[list(f)])) for row in t for f in
            ((1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2))]


def test_box_tets_fill_the_box_with_positive_conforming_tetrahedra():
    size, div = (0.3, 0.2, 0.1), (3, 2, 4)
    verts, tets = jc.meshes.box_tets(size, div)
    assert verts.shape == (4 * 3 * 5, 3) and tets.shape == (6 * 3 * 2 * 4, 4)
    vol = jc.meshes.check_tets(verts, tets)
    assert np.all(vol > 0)
    np.testing.assert_allclose(vol.sum(), 0.3 * 0.2 * 0.1, rtol=1e-12)
    np.testing.assert_allclose(verts.min(0), -np.array(size) / 2)
    np.testing.assert_allclose(verts.max(0), np.array(size) / 2)
    # conforming: every face is shared by two tetrahedra, except the boundary's, whose
    # triangles tile the box's surface (2 per square of the surface grid)
    count = collections.Counter(faces_of(tets))
    assert set(count.values()) <= {1, 2}
    boundary = [f for f, c in count.items() if c == 1]
    nx, ny, nz = div
    assert len(boundary) == 4 * (nx * ny + ny * nz + nx * nz)
    area = jc.meshes.tri_areas(verts, np.array(boundary)).sum()
    np.testing.assert_allclose(area, 2 * (0.3 * 0.2 + 0.2 * 0.1 + 0.3 * 0.1), rtol=1e-12)


def test_ball_tets_approach_the_ball_volume_with_every_element_positive():
    errors = []
    for n in (2, 4, 8):
        verts, tets = jc.meshes.ball_tets(0.1, n)
        vol = jc.meshes.check_tets(verts, tets)      # raises on any inverted element
        assert vol.min() > 0
        np.testing.assert_allclose(np.linalg.norm(verts, axis=1).max(), 0.1, rtol=1e-12)
        errors.append(abs(vol.sum() / (4 / 3 * np.pi * 0.1 ** 3) - 1))
    # an inscribed faceted ball: the volume error shrinks with refinement (about as h²)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.05 and errors[1] / errors[2] > 3


def test_cylinder_tets_approach_the_cylinder_volume_with_every_element_positive():
    errors = []
    for n in (2, 4, 8, 16):
        verts, tets = jc.meshes.cylinder_tets(0.1, 0.05, (n, 2))
        assert tets.shape == (6 * n * n * 2, 4)
        vol = jc.meshes.check_tets(verts, tets)      # raises on any inverted element
        assert vol.min() > 0
        np.testing.assert_allclose(np.linalg.norm(verts[:, :2], axis=1).max(), 0.1, rtol=1e-12)
        np.testing.assert_allclose([verts[:, 2].min(), verts[:, 2].max()], [-0.025, 0.025])
        errors.append(abs(vol.sum() / (np.pi * 0.1 ** 2 * 0.05) - 1))
    # an inscribed faceted cylinder: the volume error shrinks as h² (x4 per halving)
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[3] < 2e-3 and errors[2] / errors[3] > 3.5
    # conforming: faces shared by at most two tetrahedra, the boundary's tile the surface
    count = collections.Counter(faces_of(tets))
    assert set(count.values()) <= {1, 2}
    assert sum(c == 1 for c in count.values()) == 4 * (16 * 16 + 2 * 16 * 2)
    with pytest.raises(ValueError, match="height must be"):
        jc.meshes.cylinder_tets(0.1, 0.0, 2)


def test_grid_tiles_the_rectangle_counter_clockwise():
    verts, tris = jc.meshes.grid((2.0, 1.0), (4, 3))
    assert verts.shape == (5 * 4, 3) and tris.shape == (24, 3)
    assert np.all(verts[:, 2] == 0)
    area = jc.meshes.check_tris(verts, tris)
    np.testing.assert_allclose(area.sum(), 2.0, rtol=1e-12)
    x = verts[tris]
    normal_z = np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0])[:, 2]
    np.testing.assert_allclose(normal_z, 2 * area)          # all wind counter-clockwise
    # conforming: interior edges are shared by two triangles, boundary edges by one
    edges = collections.Counter(tuple(sorted(e)) for t in tris.tolist()
                                for e in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])))
    assert sum(c == 1 for c in edges.values()) == 2 * (4 + 3)


def test_validation_names_the_bad_element():
    verts, tets = jc.meshes.box_tets((1, 1, 1), (1, 1, 1))
    flipped = tets.copy()
    flipped[3, [0, 1]] = flipped[3, [1, 0]]
    with pytest.raises(ValueError, match="tets: element 3 is inverted"):
        jc.meshes.check_tets(verts, flipped)
    flat = np.vstack([tets, [[0, 1, 2, 3]]])          # four corners of one face: coplanar
    with pytest.raises(ValueError, match="tets: element 6 is degenerate"):
        jc.meshes.check_tets(verts, flat)
    with pytest.raises(ValueError, match="element 0 has vertex indices"):
        jc.meshes.check_tets(verts, np.array([[0, 1, 2, 99]]))
    with pytest.raises(ValueError, match="element 0 repeats a vertex"):
        jc.meshes.check_tets(verts, np.array([[0, 1, 1, 2]]))
    line = np.array([[0, 1, 2]])
    v_line = np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0]])
    with pytest.raises(ValueError, match="tris: element 0 is degenerate"):
        jc.meshes.check_tris(v_line, line)
    with pytest.raises(ValueError, match="divisions must be 3 integers"):
        jc.meshes.box_tets((1, 1, 1), (1, 0, 1))
    with pytest.raises(ValueError, match="size must be 2 positive"):
        jc.meshes.grid((1.0, -1.0), (1, 1))
    with pytest.raises(ValueError, match="radius must be"):
        jc.meshes.ball_tets(0.0, 2)


def test_load_reads_tetra_and_triangle_cells_through_meshio(tmp_path):
    meshio = pytest.importorskip("meshio", reason="loading mesh files needs meshio "
                                                  "(pip install 'jaxcontact[meshes]')")
    verts, tets = jc.meshes.box_tets((0.2, 0.2, 0.2), (2, 1, 1))
    # an unused point first: loading drops it and renumbers the cells
    points = np.vstack([[9.0, 9.0, 9.0], verts])
    path = tmp_path / "box.vtu"
    meshio.write(str(path), meshio.Mesh(points, [("tetra", tets + 1)]))
    got_verts, got_tets = jc.meshes.load(path)
    np.testing.assert_allclose(got_verts, verts)
    np.testing.assert_array_equal(got_tets, tets)
    with pytest.raises(ValueError, match="no 'triangle' cells"):
        jc.meshes.load(path, kind="triangle")
    bad = tets.copy()
    bad[1, [0, 1]] = bad[1, [1, 0]]
    meshio.write(str(path), meshio.Mesh(verts, [("tetra", bad)]))
    with pytest.raises(ValueError, match="element 1 is inverted"):
        jc.meshes.load(path)
