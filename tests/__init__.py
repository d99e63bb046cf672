"""eagle-audit's tests, a package mirroring eagle_audit/ (docs/testing.md): a helper module is imported by its
package path (``from tests.served.sglang_server import FakeSGLang``), never by a bare name off ``sys.path``."""
