"""`platter`: the users' command line for a Platter portal (its REST API under /api/v1/).

Only httpx, click and rich: it never imports Django, so it runs on any machine with the
package installed, far from the portal's code and settings."""
