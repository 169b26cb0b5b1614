#include <string.h>

#include "nsbox.h"
#include "tap.h"
#include "banned.h"

static void accepted(const char *guest)
{
	struct box_err e;
	int r;

	box_err_init(&e);
	r = box_nsbox_check_guest_path(guest, &e);
	is_int(r, 0, "'%s' accepted%s%s", guest, r ? ": " : "", r ? e.message : "");
}

static void refused(const char *guest)
{
	struct box_err e;

	box_err_init(&e);
	is_int(box_nsbox_check_guest_path(guest, &e), -1, "'%s' refused", guest ? guest : "(null)");
	is_int(e.code, BOX_E_INVALID, "... invalid_request");
}

int main(void)
{
	static const char *const good[] = {
		"/opt/x", "/mnt/data", "/srv", "/procx", "/usrdata", "/devices", "/etcetera",
		"/run/boxes", "/run/other", "/library", "/tmpx", "/inputs", "/home/u/data",
		NULL,
	};
	static const char *const bad[] = {
		"", "opt/x", "./x", "/", "//", "/proc", "/proc/x", "/dev", "/dev/shm", "/usr",
		"/usr/local", "/etc", "/etc/passwd", "/bin", "/sbin/x", "/lib", "/lib/x",
		"/lib32", "/lib64/x", "/libx32", "/workspace", "/workspace/a", "/input",
		"/output", "/output/x", "/tmp", "/tmp/x", "/run/box", "/run/box/s",
		"/a/../proc", "/a//b", "/a/./b", "/opt/", "/opt/x/.", "/a/..", "//proc",
		NULL,
	};
	int i;

	for (i = 0; good[i]; i++)
		accepted(good[i]);
	for (i = 0; bad[i]; i++)
		refused(bad[i]);
	refused(NULL);
	/* a ".." above the root is not normal either: the contract says invalid_request */
	refused("/../opt");
	refused("/..");
	is_int(box_nsbox_supported(), 1, "user namespaces supported on this machine");
	return done_testing();
}
