from django.contrib import admin
from django.urls import include, path

from example import views

urlpatterns = [
    path("", views.index, name="example_index"),
    path("enqueue/", views.enqueue, name="example_enqueue"),
    path("admin/", admin.site.urls),
    path("djwork/", include("djwork_dashboard.urls")),
]
