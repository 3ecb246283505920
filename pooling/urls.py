app_name = "pooling"

urlpatterns: list = []
