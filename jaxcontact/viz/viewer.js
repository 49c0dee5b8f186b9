// jaxcontact trajectory viewer: plain WebGL 1, no library. The data (jc-data, JSON) is
// written by jaxcontact.viz.html.save_html: geometry once, poses per frame.
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("jc-data").textContent);
  var canvas = document.getElementById("jc-canvas");
  var errorBox = document.getElementById("jc-error");
  var times = data.time;
  var frameCount = times.length;
  var api = {ready: false, frameCount: frameCount, time: times[0], playing: false};
  window.jcViewer = api;

  function fail(message) {
    errorBox.textContent = message;
    errorBox.style.display = "block";
    console.error("jcViewer error: " + message);
  }

  // --- vectors and 4x4 matrices (column-major, as WebGL wants them) -----------------------

  function sub(a, b) { return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]; }
  function add(a, b) { return [a[0] + b[0], a[1] + b[1], a[2] + b[2]]; }
  function scale(a, s) { return [a[0] * s, a[1] * s, a[2] * s]; }
  function dot(a, b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
  function cross(a, b) {
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
  }
  function normalize(a) {
    var n = Math.sqrt(dot(a, a)) || 1;
    return [a[0] / n, a[1] / n, a[2] / n];
  }

  function multiply(a, b) {
    var out = new Float32Array(16);
    for (var c = 0; c < 4; c++) {
      for (var r = 0; r < 4; r++) {
        var s = 0;
        for (var k = 0; k < 4; k++) s += a[k * 4 + r] * b[c * 4 + k];
        out[c * 4 + r] = s;
      }
    }
    return out;
  }

  function perspective(fovy, aspect, near, far) {
    var f = 1 / Math.tan(fovy / 2), m = new Float32Array(16);
    m[0] = f / aspect;
    m[5] = f;
    m[10] = (far + near) / (near - far);
    m[11] = -1;
    m[14] = 2 * far * near / (near - far);
    return m;
  }

  function lookAt(eye, target, up) {
    var f = normalize(sub(target, eye)), s = normalize(cross(f, up)), u = cross(s, f);
    var m = new Float32Array(16);
    m[0] = s[0]; m[4] = s[1]; m[8] = s[2];
    m[1] = u[0]; m[5] = u[1]; m[9] = u[2];
    m[2] = -f[0]; m[6] = -f[1]; m[10] = -f[2];
    m[12] = -dot(s, eye); m[13] = -dot(u, eye); m[14] = dot(f, eye); m[15] = 1;
    return m;
  }

  // the rigid transform x -> R(q) x + p, q = (w, x, y, z) a unit quaternion
  function pose(p, q) {
    var w = q[0], x = q[1], y = q[2], z = q[3], m = new Float32Array(16);
    m[0] = 1 - 2 * (y * y + z * z); m[1] = 2 * (x * y + w * z); m[2] = 2 * (x * z - w * y);
    m[4] = 2 * (x * y - w * z); m[5] = 1 - 2 * (x * x + z * z); m[6] = 2 * (y * z + w * x);
    m[8] = 2 * (x * z + w * y); m[9] = 2 * (y * z - w * x); m[10] = 1 - 2 * (x * x + y * y);
    m[12] = p[0]; m[13] = p[1]; m[14] = p[2]; m[15] = 1;
    return m;
  }

  function placeScaled(p, r) {
    var m = new Float32Array(16);
    m[0] = m[5] = m[10] = r;
    m[12] = p[0]; m[13] = p[1]; m[14] = p[2]; m[15] = 1;
    return m;
  }

  var IDENTITY = placeScaled([0, 0, 0], 1);

  // maps the unit z-axis parts (roundMesh) to start at p along dir, `width` wide, `length` long
  function along(p, dir, width, length) {
    var n = normalize(dir), helper = Math.abs(n[0]) < 0.9 ? [1, 0, 0] : [0, 1, 0];
    var t1 = normalize(cross(n, helper)), t2 = cross(n, t1), m = new Float32Array(16);
    for (var k = 0; k < 3; k++) {
      m[k] = t1[k] * width;
      m[4 + k] = t2[k] * width;
      m[8 + k] = n[k] * length;
      m[12 + k] = p[k];
    }
    m[15] = 1;
    return m;
  }

  // --- WebGL set-up ------------------------------------------------------------------------

  var gl = canvas.getContext("webgl", {antialias: true, preserveDrawingBuffer: true}) ||
           canvas.getContext("experimental-webgl", {preserveDrawingBuffer: true});
  if (!gl) {
    fail("WebGL is not available in this browser.");
    return;
  }

  var VERTEX = [
    "attribute vec3 aPos;",
    "attribute vec3 aNormal;",
    "uniform mat4 uViewProj;",
    "uniform mat4 uModel;",
    "varying vec3 vNormal;",
    "varying vec3 vWorld;",
    "void main() {",
    "  vec4 world = uModel * vec4(aPos, 1.0);",
    "  vWorld = world.xyz;",
    "  vNormal = mat3(uModel) * aNormal;",
    "  gl_Position = uViewProj * world;",
    "}"].join("\n");

  // uMode: 0 lit, 1 unlit (overlay), 2 lit and checkered (planes)
  var FRAGMENT = [
    "#ifdef GL_FRAGMENT_PRECISION_HIGH",
    "precision highp float;",
    "#else",
    "precision mediump float;",
    "#endif",
    "uniform vec3 uColor;",
    "uniform vec3 uLight;",
    "uniform float uAmbient;",
    "uniform float uMode;",
    "uniform vec3 uTangent1;",
    "uniform vec3 uTangent2;",
    "uniform float uCell;",
    "uniform vec3 uCenter;",
    "uniform float uHalf;",
    "uniform vec3 uBackground;",
    "varying vec3 vNormal;",
    "varying vec3 vWorld;",
    "void main() {",
    "  if (uMode > 0.5 && uMode < 1.5) { gl_FragColor = vec4(uColor, 1.0); return; }",
    "  vec3 n = normalize(vNormal);",
    "  if (!gl_FrontFacing) n = -n;",
    "  vec3 base = uColor;",
    "  if (uMode > 1.5) {",
    "    float k = floor(dot(vWorld, uTangent1) / uCell) + floor(dot(vWorld, uTangent2) / uCell);",
    "    if (mod(k, 2.0) > 0.5) base = base * 0.86;",
    "  }",
    "  float diffuse = max(dot(n, uLight), 0.0);",
    "  vec3 color = base * (uAmbient + (1.0 - uAmbient) * diffuse);",
    "  if (uMode > 1.5) {",
    "    float fade = smoothstep(0.4 * uHalf, uHalf, length(vWorld - uCenter));",
    "    color = mix(color, uBackground, fade);",
    "  }",
    "  gl_FragColor = vec4(color, 1.0);",
    "}"].join("\n");

  function shader(type, source) {
    var s = gl.createShader(type);
    gl.shaderSource(s, source);
    gl.compileShader(s);
    if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
    return s;
  }

  var program = gl.createProgram();
  try {
    gl.attachShader(program, shader(gl.VERTEX_SHADER, VERTEX));
    gl.attachShader(program, shader(gl.FRAGMENT_SHADER, FRAGMENT));
    gl.linkProgram(program);
    if (!gl.getProgramParameter(program, gl.LINK_STATUS)) {
      throw new Error(gl.getProgramInfoLog(program));
    }
  } catch (e) {
    fail("shader: " + e.message);
    return;
  }
  gl.useProgram(program);
  var loc = {};
  ["uViewProj", "uModel", "uColor", "uLight", "uAmbient", "uMode", "uTangent1", "uTangent2",
   "uCell", "uCenter", "uHalf", "uBackground"].forEach(function (name) {
    loc[name] = gl.getUniformLocation(program, name);
  });
  var aPos = gl.getAttribLocation(program, "aPos");
  var aNormal = gl.getAttribLocation(program, "aNormal");
  gl.enableVertexAttribArray(aPos);
  gl.enableVertexAttribArray(aNormal);
  gl.enable(gl.DEPTH_TEST);

  // --- meshes: interleaved (position, normal) triangles ----------------------------------

  function upload(values, mode) {
    var buffer = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, buffer);
    gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(values), gl.STATIC_DRAW);
    return {buffer: buffer, count: values.length / 6,
            mode: mode === undefined ? gl.TRIANGLES : mode};
  }

  function pushVertex(out, p, n) { out.push(p[0], p[1], p[2], n[0], n[1], n[2]); }

  // a capsule along z (radius r, segment half length h); h = 0 is a sphere
  function capsuleMesh(r, h, around, rings) {
    var lat = [], out = [], i, j;
    for (i = 0; i <= rings; i++) lat.push([Math.PI / 2 * i / rings, h]);
    for (i = 0; i <= rings; i++) lat.push([Math.PI / 2 + Math.PI / 2 * i / rings, -h]);
    function vertex(ring, k) {
      var theta = ring[0], phi = 2 * Math.PI * k / around;
      var n = [Math.sin(theta) * Math.cos(phi), Math.sin(theta) * Math.sin(phi), Math.cos(theta)];
      return [[r * n[0], r * n[1], r * n[2] + ring[1]], n];
    }
    for (i = 0; i + 1 < lat.length; i++) {
      for (j = 0; j < around; j++) {
        var a = vertex(lat[i], j), b = vertex(lat[i + 1], j);
        var c = vertex(lat[i + 1], j + 1), d = vertex(lat[i], j + 1);
        [a, b, c, a, c, d].forEach(function (v) { pushVertex(out, v[0], v[1]); });
      }
    }
    return out;
  }

  function boxMesh(h) {
    var out = [];
    for (var axis = 0; axis < 3; axis++) {
      for (var sign = -1; sign <= 1; sign += 2) {
        var n = [0, 0, 0], u = [0, 0, 0], v = [0, 0, 0];
        n[axis] = sign;
        u[(axis + 1) % 3] = 1;
        v[(axis + 2) % 3] = 1;
        if (sign < 0) u = scale(u, -1);
        // corners c + s u + t v, counter-clockwise seen from outside
        var centre = scale(n, h[axis]);
        var hu = h[(axis + 1) % 3], hv = h[(axis + 2) % 3];
        var corners = [[-1, -1], [1, -1], [1, 1], [-1, 1]].map(function (st) {
          return add(centre, add(scale(u, st[0] * hu), scale(v, st[1] * hv)));
        });
        [0, 1, 2, 0, 2, 3].forEach(function (k) { pushVertex(out, corners[k], n); });
      }
    }
    return out;
  }

  function flatMesh(vertices, faces) {
    var out = [];
    for (var f = 0; f < faces.length; f += 3) {
      var a = vertices[faces[f]], b = vertices[faces[f + 1]], c = vertices[faces[f + 2]];
      var n = normalize(cross(sub(b, a), sub(c, a)));
      pushVertex(out, a, n); pushVertex(out, b, n); pushVertex(out, c, n);
    }
    return out;
  }

  function smoothMesh(vertices, normals, faces) {
    var out = [];
    for (var f = 0; f < faces.length; f++) pushVertex(out, vertices[faces[f]], normals[faces[f]]);
    return out;
  }

  var hulls = data.meshes.map(function (m) {
    var v = [];
    for (var i = 0; i < m.vertices.length; i++) v.push(m.vertices[i]);
    return flatMesh(v, m.faces);
  });

  var geoms = data.geoms.map(function (g) {
    var values;
    if (g.shape === "sphere") values = capsuleMesh(g.size[0], 0, 32, 12);
    else if (g.shape === "capsule") values = capsuleMesh(g.size[0], g.size[1], 32, 8);
    else if (g.shape === "box") values = boxMesh(g.size);
    else values = hulls[g.mesh];
    return {body: g.body, mesh: upload(values), local: pose(g.pos, g.quat), color: g.color};
  });

  var planes = data.planes.map(function (p) {
    var h = p.half, c = p.center, out = [];
    var corners = [[-1, -1], [1, -1], [1, 1], [-1, 1]].map(function (st) {
      return add(c, add(scale(p.tangent1, st[0] * h), scale(p.tangent2, st[1] * h)));
    });
    [0, 1, 2, 0, 2, 3].forEach(function (k) { pushVertex(out, corners[k], p.normal); });
    return {mesh: upload(out), plane: p};
  });

  var obstacles = data.obstacles.map(function (o) {
    return upload(smoothMesh(o.vertices, o.normals, o.faces));
  });

  // the unit cylinder (cone) of radius 1 about the z axis from z = 0 to 1 (to its apex)
  function roundMesh(around, cone) {
    var out = [];
    for (var j = 0; j < around; j++) {
      var a = 2 * Math.PI * j / around, b = 2 * Math.PI * (j + 1) / around;
      var p0 = [Math.cos(a), Math.sin(a), 0], p1 = [Math.cos(b), Math.sin(b), 0];
      var n0 = normalize([p0[0], p0[1], cone ? 1 : 0]);
      var n1 = normalize([p1[0], p1[1], cone ? 1 : 0]);
      if (cone) {
        pushVertex(out, p0, n0);
        pushVertex(out, p1, n1);
        pushVertex(out, [0, 0, 1], normalize(add(n0, n1)));
        pushVertex(out, p1, [0, 0, -1]);     // the base
        pushVertex(out, p0, [0, 0, -1]);
        pushVertex(out, [0, 0, 0], [0, 0, -1]);
      } else {
        var q0 = [p0[0], p0[1], 1], q1 = [p1[0], p1[1], 1];
        pushVertex(out, p0, n0); pushVertex(out, p1, n1); pushVertex(out, q1, n1);
        pushVertex(out, p0, n0); pushVertex(out, q1, n1); pushVertex(out, q0, n0);
      }
    }
    return out;
  }

  var unitSphere = upload(capsuleMesh(1, 0, 16, 6));
  var unitCylinder = upload(roundMesh(16, false));
  var unitCone = upload(roundMesh(16, true));

  // --- camera: orbit about a target, the world z axis up ---------------------------------

  var cam = (function () {
    var c = data.camera, d = sub(c.position, c.target), dist = Math.sqrt(dot(d, d));
    return {target: c.target.slice(), distance: dist, fov: c.fov * Math.PI / 180,
            azimuth: Math.atan2(d[1], d[0]),
            // not straight down or up: the world z axis is the camera's up
            elevation: Math.min(Math.max(Math.asin(d[2] / dist), -1.56), 1.56)};
  })();

  function eyePosition() {
    var ce = Math.cos(cam.elevation);
    return add(cam.target, scale([ce * Math.cos(cam.azimuth), ce * Math.sin(cam.azimuth),
                                  Math.sin(cam.elevation)], cam.distance));
  }

  // --- frames -----------------------------------------------------------------------------

  var t0 = times[0], t1 = times[frameCount - 1];

  // (frame i, fraction) with times[i] <= t < times[i + 1]
  function locate(t) {
    if (t <= t0 || frameCount === 1) return [0, 0];
    if (t >= t1) return [frameCount - 1, 0];
    var lo = 0, hi = frameCount - 1;
    while (hi - lo > 1) {
      var mid = (lo + hi) >> 1;
      if (times[mid] <= t) lo = mid; else hi = mid;
    }
    return [lo, (t - times[lo]) / (times[hi] - times[lo])];
  }

  function lerp(a, b, s) { return add(a, scale(sub(b, a), s)); }

  function bodyPose(i, s, b) {
    var p = data.pos[i][b], q = data.quat[i][b];
    if (s > 0) {
      // normalized linear interpolation, on the same side of the double cover
      var q2 = data.quat[i + 1][b];
      var sign = q[0] * q2[0] + q[1] * q2[1] + q[2] * q2[2] + q[3] * q2[3] < 0 ? -1 : 1;
      var mixed = [0, 1, 2, 3].map(function (k) { return q[k] + s * (sign * q2[k] - q[k]); });
      var n = Math.sqrt(mixed.reduce(function (sum, v) { return sum + v * v; }, 0));
      q = mixed.map(function (v) { return v / n; });
      p = lerp(p, data.pos[i + 1][b], s);
    }
    return pose(p, q);
  }

  // --- drawing ----------------------------------------------------------------------------

  function bind(mesh) {
    gl.bindBuffer(gl.ARRAY_BUFFER, mesh.buffer);
    gl.vertexAttribPointer(aPos, 3, gl.FLOAT, false, 24, 0);
    gl.vertexAttribPointer(aNormal, 3, gl.FLOAT, false, 24, 12);
  }

  function drawMesh(mesh, model, color, mode) {
    bind(mesh);
    gl.uniformMatrix4fv(loc.uModel, false, model);
    gl.uniform3fv(loc.uColor, color);
    gl.uniform1f(loc.uMode, mode || 0);
    gl.drawArrays(mesh.mode, 0, mesh.count);
  }

  var colors = data.colors;
  var contactData = data.contacts || null;

  function draw() {
    var dpr = window.devicePixelRatio || 1;
    var width = Math.max(1, Math.floor(canvas.clientWidth * dpr));
    var height = Math.max(1, Math.floor(canvas.clientHeight * dpr));
    if (canvas.width !== width || canvas.height !== height) {
      canvas.width = width;
      canvas.height = height;
    }
    gl.viewport(0, 0, width, height);
    var bg = colors.background;
    gl.clearColor(bg[0], bg[1], bg[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);

    var eye = eyePosition(), up = [0, 0, 1];
    var near = Math.max(cam.distance * 0.01, 1e-4), far = cam.distance * 20 + data.sceneRadius * 20;
    var viewProj = multiply(perspective(cam.fov, width / height, near, far),
                            lookAt(eye, cam.target, up));
    gl.uniformMatrix4fv(loc.uViewProj, false, viewProj);
    // one directional light, from above and behind the viewer's left shoulder
    var forward = normalize(sub(cam.target, eye)), right = normalize(cross(forward, up));
    var light = add(add(scale(forward, -0.55), scale(right, -0.35)), [0, 0, 0.9]);
    gl.uniform3fv(loc.uLight, normalize(light));
    gl.uniform1f(loc.uAmbient, 0.38);

    var at = locate(api.time), i = at[0], s = at[1];

    planes.forEach(function (p) {
      gl.uniform3fv(loc.uTangent1, p.plane.tangent1);
      gl.uniform3fv(loc.uTangent2, p.plane.tangent2);
      gl.uniform1f(loc.uCell, p.plane.cell);
      gl.uniform3fv(loc.uCenter, p.plane.center);
      gl.uniform1f(loc.uHalf, p.plane.half);
      gl.uniform3fv(loc.uBackground, colors.background);
      drawMesh(p.mesh, IDENTITY, colors.plane, 2);
    });
    obstacles.forEach(function (mesh) { drawMesh(mesh, IDENTITY, colors.obstacle, 0); });

    var poses = [];
    geoms.forEach(function (g) {
      if (!poses[g.body]) poses[g.body] = bodyPose(i, s, g.body);
      drawMesh(g.mesh, multiply(poses[g.body], g.local), g.color, 0);
    });

    var small = 0.006 * data.sceneRadius;
    for (var k = 0; k < data.particleRadius.length; k++) {
      var p = data.particlePos[i][k];
      if (s > 0) p = lerp(p, data.particlePos[i + 1][k], s);
      var size = data.particleRadius[k] > 0 ? data.particleRadius[k] : small;
      drawMesh(unitSphere, placeScaled(p, size), colors.particle, 0);
    }

    if (contactData) {
      // on top of everything: contact points are inside the bodies' silhouettes
      gl.disable(gl.DEPTH_TEST);
      drawContacts(contactData.rows[s < 0.5 ? i : i + 1], 0.015 * data.sceneRadius);
      gl.enable(gl.DEPTH_TEST);
    }

    api.ready = true;
  }

  // a contact: a ball at the point and an arrow along the normal, as long as the force
  function drawContacts(rows, radius) {
    var width = 0.3 * radius;
    for (var r = 0; r < rows.length; r += 7) {
      var point = [rows[r], rows[r + 1], rows[r + 2]];
      var normal = [rows[r + 3], rows[r + 4], rows[r + 5]];
      var length = rows[r + 6] * contactData.forceScale, head = Math.min(8 * width, length);
      drawMesh(unitSphere, placeScaled(point, radius), colors.contact, 1);
      if (length <= 0) continue;
      if (length > head) {
        drawMesh(unitCylinder, along(point, normal, width, length - head), colors.contact, 1);
      }
      drawMesh(unitCone, along(add(point, scale(normal, length - head)), normal, 2.5 * width, head),
               colors.contact, 1);
    }
  }

  // --- playback and controls --------------------------------------------------------------

  var playButton = document.getElementById("jc-play");
  var slider = document.getElementById("jc-slider");
  var timeLabel = document.getElementById("jc-time");
  var speedSelect = document.getElementById("jc-speed");
  var dirty = true, lastTick = null;
  slider.min = String(t0);
  slider.max = String(t1);

  function showTime() {
    slider.value = String(api.time);
    timeLabel.textContent = api.time.toFixed(3) + " s";
    playButton.textContent = api.playing ? "Pause" : "Play";
  }

  function setTime(t) {
    t = Number(t);
    if (!isFinite(t)) return;
    api.time = Math.min(Math.max(t, t0), t1);
    showTime();
    dirty = true;
  }

  function play() { api.playing = frameCount > 1; lastTick = null; showTime(); }
  function pause() { api.playing = false; showTime(); }

  api.setTime = function (t) { setTime(t); draw(); dirty = false; };
  api.play = play;
  api.pause = pause;
  api.draw = function () { draw(); dirty = false; };

  playButton.addEventListener("click", function () {
    if (api.playing) pause();
    else { if (api.time >= t1) setTime(t0); play(); }
  });
  slider.addEventListener("input", function () { pause(); setTime(slider.value); });
  window.addEventListener("keydown", function (e) {
    if (e.code === "Space" && e.target.tagName !== "INPUT" && e.target.tagName !== "SELECT") {
      e.preventDefault();
      playButton.click();
    }
  });

  // orbit: drag rotates, shift-drag or right-drag pans, the wheel zooms
  var drag = null;
  canvas.addEventListener("contextmenu", function (e) { e.preventDefault(); });
  canvas.addEventListener("pointerdown", function (e) {
    drag = {x: e.clientX, y: e.clientY, pan: e.shiftKey || e.button === 2};
    canvas.setPointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointerup", function (e) {
    drag = null;
    canvas.releasePointerCapture(e.pointerId);
  });
  canvas.addEventListener("pointermove", function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    drag.x = e.clientX;
    drag.y = e.clientY;
    if (drag.pan) {
      var eye = eyePosition(), forward = normalize(sub(cam.target, eye));
      var right = normalize(cross(forward, [0, 0, 1])), up = cross(right, forward);
      var perPixel = 2 * cam.distance * Math.tan(cam.fov / 2) / Math.max(canvas.clientHeight, 1);
      cam.target = add(cam.target, add(scale(right, -dx * perPixel), scale(up, dy * perPixel)));
    } else {
      cam.azimuth -= dx * 0.008;
      cam.elevation = Math.min(Math.max(cam.elevation + dy * 0.008, -1.55), 1.55);
    }
    dirty = true;
  });
  canvas.addEventListener("wheel", function (e) {
    e.preventDefault();
    cam.distance *= Math.exp(e.deltaY * 0.001);
    dirty = true;
  }, {passive: false});
  window.addEventListener("resize", function () { dirty = true; });

  function tick(now) {
    if (api.playing) {
      if (lastTick !== null) {
        var t = api.time + (now - lastTick) / 1000 * Number(speedSelect.value);
        setTime(t > t1 ? t0 + (t - t1) % Math.max(t1 - t0, 1e-9) : t);
      }
      lastTick = now;
    }
    if (dirty) {
      draw();
      dirty = false;
    }
    window.requestAnimationFrame(tick);
  }

  // #t=0.5&paused=1: start (paused) at t
  function applyHash() {
    var query = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("=");
      if (kv[0]) query[decodeURIComponent(kv[0])] = decodeURIComponent(kv[1] || "");
    });
    if (query.t !== undefined) setTime(query.t);
    if (query.speed !== undefined) speedSelect.value = query.speed;
    if (query.paused === "1" || query.paused === "true") pause(); else play();
  }
  window.addEventListener("hashchange", applyHash);

  try {
    setTime(t0);
    applyHash();
    draw();
    dirty = false;
    console.log("jcViewer ready: " + frameCount + " frames, t = " + api.time.toFixed(4));
  } catch (e) {
    fail(e && e.stack ? e.stack : String(e));
    return;
  }
  window.requestAnimationFrame(tick);
})();
