#!/usr/bin/python3
"""A small RTSP server for the end-to-end tests: GStreamer's RTSP server on 127.0.0.1:PORT
serving a live test pattern (H.264) at rtsp://127.0.0.1:PORT/test.

Usage: server.py PORT [WIDTH HEIGHT FPS]. Prints `ready` on stdout once it listens, then serves
until it is killed (the tests kill it to simulate a camera that goes away, and start it again).
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> None:
    port = sys.argv[1]
    width, height, fps = (sys.argv[2:5] + ["160", "120", "15"][len(sys.argv[2:5]):])
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory()
    factory.set_launch(
        "( videotestsrc is-live=true pattern=ball "
        f"! video/x-raw,width={width},height={height},framerate={fps}/1 "
        "! x264enc tune=zerolatency speed-preset=ultrafast key-int-max=15 "
        "! rtph264pay name=pay0 pt=96 config-interval=1 )"
    )
    factory.set_shared(True)
    server.get_mount_points().add_factory("/test", factory)
    if server.attach(None) == 0:
        print("cannot listen on port " + port, file=sys.stderr, flush=True)
        sys.exit(1)
    print("ready", flush=True)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
