from django.http import HttpRequest

from pooljudge import __version__


def site(request: HttpRequest) -> dict:
    return {"POOLJUDGE_VERSION": __version__}
