"""The physics of the step: contact (laws, colliders, broad phase), gravity, and the kinds of
physics a scene can hold, one file each (`kinds`). A new kind is one file plus its name in
`KIND_FILES`: importing a file registers its kind, in this order, which is the order of their
terms in the step."""

import importlib

KIND_FILES = ("springs", "joints", "tendons", "motors", "attachments", "solids", "cloth", "energy",
              "drag", "fluid")
for _file in KIND_FILES:
    importlib.import_module(f"{__name__}.{_file}")

from jaxcontact.models.attachments import Attachment  # noqa: E402  (after the registrations)
from jaxcontact.models.cloth import Cloth  # noqa: E402
from jaxcontact.models.drag import Drag  # noqa: E402
from jaxcontact.models.fluid import Fluid  # noqa: E402
from jaxcontact.models.joints import Joint  # noqa: E402
from jaxcontact.models.kinds import KINDS, Kind, register  # noqa: E402
from jaxcontact.models.motors import Motor  # noqa: E402
from jaxcontact.models.solids import Solid  # noqa: E402
from jaxcontact.models.springs import Spring  # noqa: E402

__all__ = ["Attachment", "Cloth", "Drag", "Fluid", "Joint", "KINDS", "KIND_FILES", "Kind",
           "Motor", "Solid", "Spring", "register"]
